//! What a drafter call does to the target pass after it: decodes with ReDrafter at a fixed
//! one-token draft and, step by step in rotation, replaces the drafter call with nothing, a
//! spin of the same length, or a write through a buffer the size of the drafter's weights,
//! then reports the median verify pass of each variant by cached length. The variants share
//! the run, so the machine's noise falls on all of them alike.
//!
//! `cargo run --release -p draftsmith-decode --example pass_after_draft -- TARGET.gguf DRAFTER_DIR [prompts] [tokens]`

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::backend::Flex;
use draftsmith_core::DraftTree;
use draftsmith_decode::{
    build_proposer_with, generate_speculative_with, DraftContext, DraftPolicy, HiddenState, LoadedDrafters, Method,
    MethodParams, Proposer, Sampler, SamplingConfig, Verified,
};
use draftsmith_kernels::probe::CpuInfo;
use draftsmith_model::{load_model, ChatMessage, LoadOptions, MatmulWeights};

type B = Flex;

/// What a step does before its verify pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    /// The real drafter call (its one-token draft is verified).
    Drafter,
    /// No call: a one-token guess (the last token) is verified.
    NoCall,
    /// A spin as long as a drafter call, then the guess.
    Spin,
    /// A write through a buffer the size of the drafter's weights, then the guess.
    Evict,
    /// No draft: a one-token pass.
    Plain,
}

const VARIANTS: [Variant; 5] = [Variant::Drafter, Variant::NoCall, Variant::Spin, Variant::Evict, Variant::Plain];

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Drafter => "after drafter",
            Variant::NoCall => "no call",
            Variant::Spin => "spin",
            Variant::Evict => "5 MB write",
            Variant::Plain => "plain step",
        }
    }
}

const PROMPTS: [&str; 8] = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator works to a ten-year-old.",
    "Compose an email to a colleague asking to move a meeting to Thursday.",
    "What are the main causes of the French Revolution?",
    "Give me five tips for learning to play the guitar as an adult.",
    "Describe the water cycle in detail.",
    "Write a poem about autumn leaves in the city.",
    "How do I make a good cup of coffee with a French press?",
];

/// Rotates the variants over the steps; records which one each step ran.
struct Rotating {
    inner: Box<dyn Proposer>,
    step: usize,
    ran: Vec<Variant>,
    spin: Duration,
    buffer: Vec<u8>,
}

impl Proposer for Rotating {
    fn name(&self) -> &str {
        "rotating"
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        Some(HiddenState::Final)
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, draftsmith_decode::DecodeError> {
        let variant = VARIANTS[self.step % VARIANTS.len()];
        self.step += 1;
        self.ran.push(variant);
        let guess = DraftTree::chain(&[*ctx.tokens.last().expect("a token")]);
        Ok(match variant {
            Variant::Drafter => {
                let started = Instant::now();
                let tree = self.inner.propose(ctx)?;
                // Learn what a call costs, for the spin variant.
                self.spin = (self.spin * 7 + started.elapsed()) / 8;
                tree
            }
            Variant::NoCall => guess,
            Variant::Spin => {
                let started = Instant::now();
                while started.elapsed() < self.spin {
                    std::hint::spin_loop();
                }
                guess
            }
            Variant::Evict => {
                let step = self.step as u8;
                self.buffer.iter_mut().step_by(64).for_each(|b| *b = b.wrapping_add(step));
                guess
            }
            Variant::Plain => DraftTree::new(),
        })
    }

    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        if self.ran.last() == Some(&Variant::Drafter) {
            self.inner.observe_verified(ctx, tree, verified);
        }
    }
}

fn main() {
    println!("CPU: {}", CpuInfo::detect());
    let mut args = std::env::args().skip(1);
    let target_path = PathBuf::from(args.next().expect("TARGET.gguf"));
    let drafter_dir = PathBuf::from(args.next().expect("DRAFTER_DIR"));
    let prompts: usize = args.next().map_or(PROMPTS.len(), |a| a.parse().expect("prompts"));
    let tokens: usize = args.next().map_or(256, |a| a.parse().expect("tokens"));
    let device = Default::default();
    let target = load_model::<B>(&target_path, LoadOptions::new(MatmulWeights::Quantized), &device).expect("target");
    let drafters = LoadedDrafters::load(&target, None, Some(&drafter_dir), &device).expect("drafter");
    let params = MethodParams {
        beam_width: 1,
        beam_length: 2,
        draft_policy: DraftPolicy::Fixed,
        drafter: Some(drafter_dir.display().to_string()),
        ..MethodParams::default()
    };
    let inner = build_proposer_with(Method::ReDrafter, &params, &target.model, drafters.as_drafters())
        .expect("proposer")
        .expect("redrafter has a proposer");
    let mut rotating =
        Rotating { inner, step: 0, ran: Vec::new(), spin: Duration::from_micros(250), buffer: vec![0u8; 5 << 20] };
    let stop = target.tokenizer.eos_ids().to_vec();
    // (variant, cached-length bin) → verify ms of each step.
    let mut by_bin: BTreeMap<(usize, Variant), Vec<f64>> = BTreeMap::new();
    let template = target.tokenizer.chat_template().expect("a chat template");
    for text in PROMPTS.iter().cycle().take(prompts) {
        let text = template.render(&[ChatMessage::new("user", text)], true).expect("render");
        let prompt = target.tokenizer.encode(&text).expect("encode");
        rotating.ran.clear();
        rotating.step = 0;
        let out = generate_speculative_with(
            &target.model,
            &prompt,
            tokens,
            &stop,
            &mut rotating,
            &mut Sampler::new(SamplingConfig::default()),
            &mut |_| true,
        )
        .expect("generation");
        let mut cached = prompt.len();
        for (step, variant) in out.steps.iter().zip(&rotating.ran) {
            by_bin.entry((cached / 64 * 64, *variant)).or_default().push(step.verify_ms);
            cached += step.emitted;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("median verify ms by cached length (steps); drafter call ≈ {:.3} ms", rotating.spin.as_secs_f64() * 1e3);
    print!("{:>8}", "cached");
    VARIANTS.iter().for_each(|v| print!("{:>16}", v.label()));
    println!();
    let bins: Vec<usize> =
        by_bin.keys().map(|(b, _)| *b).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    for bin in bins {
        print!("{bin:>8}");
        for v in VARIANTS {
            match by_bin.get_mut(&(bin, v)) {
                Some(times) if times.len() >= 5 => print!("{:>10.3} ({:>3})", median(times), times.len()),
                _ => print!("{:>16}", "-"),
            }
        }
        println!();
    }
}
