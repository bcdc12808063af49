//! The verify cost curve: t(n) for chains and random trees at each cached context, split into
//! matrices / attention / the rest, with the roofline beside it.

use burn::tensor::backend::Backend;
use draftsmith_decode::cost::{cached_context, time_passes, DraftShape, Rounds};
use draftsmith_model::Model;
use serde::Serialize;

use super::machine::Machine;
use super::{BenchError, BenchEvent};

/// One point of the curve (a line of the table, an element of `verify_curve`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Cached tokens before the pass.
    pub context: usize,
    pub shape: DraftShape,
    /// Tokens in the pass.
    pub n: usize,
    /// Median wall time.
    pub ms: f64,
    /// This pass's time over the 1-token pass's at the same context and shape: the median of
    /// the ratios within each round of passes ([`time_passes`]), not the ratio of medians.
    pub over_step1: f64,
    /// Where the time went: only the quantized CPU path times its parts (`None` elsewhere).
    #[serde(flatten)]
    pub split: Option<Split>,
    /// The roofline beside it, on the quantized CPU path (`None` elsewhere).
    #[serde(flatten)]
    pub roofline: Option<RooflinePoint>,
}

/// A pass's time split into the matrix products, attention and everything else.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    pub matrices_ms: f64,
    pub attention_ms: f64,
    pub other_ms: f64,
}

/// The roofline of a pass over `n` tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RooflinePoint {
    /// At the kernel's measured peak.
    pub roofline_ms: f64,
    pub roofline_over_step1: f64,
    /// At the instruction peak (what a perfect kernel could do).
    pub isa_roofline_ms: f64,
    /// `isa_roofline_ms` over its 1-token value (printed, not recorded).
    #[serde(skip)]
    pub isa_roofline_over_step1: f64,
}

/// Times every size of `sizes` (1 added when missing) as a chain and as a tree at each of
/// `contexts`, `runs` passes per point; contexts that do not fit the model are skipped.
pub fn verify_curve<B: Backend>(
    model: &Model<B>,
    machine: &Machine,
    sizes: &[usize],
    contexts: &[usize],
    runs: usize,
    on_event: &mut dyn FnMut(BenchEvent<'_>),
) -> Result<Vec<CurvePoint>, BenchError> {
    let roofline = |n: usize| {
        machine.roofline.as_ref().map(|r| {
            let (kernel, isa) = (|n| r.ms(n, r.kernel_peak_gmac_s), |n| r.ms(n, r.instruction_peak_gmac_s));
            RooflinePoint {
                roofline_ms: kernel(n),
                roofline_over_step1: kernel(n) / kernel(1),
                isa_roofline_ms: isa(n),
                isa_roofline_over_step1: isa(n) / isa(1),
            }
        })
    };
    let max_context = model.config().max_position_embeddings;
    // The 1-token pass first: every ratio is taken against it, round by round.
    let mut sizes: Vec<usize> = sizes.iter().copied().filter(|&n| n != 1).collect();
    sizes.insert(0, 1);
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let mut points = Vec::new();
    on_event(BenchEvent::CurveStart { runs });
    for &context in contexts {
        if context == 0 {
            return Err(BenchError::EmptyContext);
        }
        if context + largest >= max_context {
            on_event(BenchEvent::CurveSkipped { context, largest, max_context });
            continue;
        }
        let mut cache = cached_context(model, context, largest)?;
        for shape in [DraftShape::Chain, DraftShape::Tree] {
            for t in time_passes(model, &mut cache, shape, &sizes, Rounds::full(runs))? {
                let n = t.n;
                let point = CurvePoint {
                    context,
                    shape,
                    n,
                    ms: t.ms,
                    over_step1: t.over_first,
                    split: machine.roofline.is_some().then_some(Split {
                        matrices_ms: t.matrices_ms,
                        attention_ms: t.attention_ms,
                        other_ms: t.other_ms,
                    }),
                    roofline: roofline(n),
                };
                on_event(BenchEvent::CurvePoint(&point));
                points.push(point);
            }
        }
    }
    Ok(points)
}
