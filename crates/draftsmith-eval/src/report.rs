//! `report.md`: the summary as a markdown table, the exact command, notes on methods slower
//! than `ar` and on lossless failures, and the plot.

use std::fmt::Write;

use draftsmith_decode::Method;

use crate::manifest::Manifest;
use crate::summary::{interval_text, Summary};

/// The draft sizes each method verified over the run ([`crate::summary::TREE_SIZE_BUCKETS`]) and
/// their mean in each quarter of the answers.
fn push_draft_sizes(md: &mut String, summary: &Summary) {
    let labels = crate::summary::tree_size_labels();
    let rows: Vec<String> = summary
        .iter()
        .filter(|(_, s)| !s.tree_size_pct.is_empty())
        .map(|(name, s)| {
            let shares: Vec<String> = s.tree_size_pct.iter().map(|p| format!("{p:.1}")).collect();
            let quarters: Vec<String> = s.tree_size_by_quarter.iter().map(|q| num(*q, 1)).collect();
            format!("| {name} | {} | {} |", shares.join(" | "), quarters.join(" / "))
        })
        .collect();
    let header = format!(
        "| method | {} | mean by quarter of the answer |\n|---|{}---|",
        labels.join(" | "),
        "---:|".repeat(labels.len())
    );
    push_table(
        md,
        "Draft sizes verified: the share of steps (%) whose verified tree had that many draft nodes (0: a plain `ar` step), and the mean size over the steps in each quarter of the answers (first / second / third / last), under the run's draft policy.",
        &header,
        &rows,
    );
}

/// How many mismatches the report lists (all are in summary.json).
const MAX_LISTED: usize = 20;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// [`interval_text`], or "–" without an interval.
fn interval(v: Option<[f64; 2]>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| interval_text(v, digits))
}

/// "sampled (T = 1, min-p 0.1, …, seed 0)": the settings that are not off.
pub(crate) fn sampling_label(c: &draftsmith_decode::SamplingConfig) -> String {
    let mut parts = vec![format!("T = {}", c.temperature)];
    if c.top_k > 0 {
        parts.push(format!("top-k {}", c.top_k));
    }
    if c.top_p < 1.0 {
        parts.push(format!("top-p {}", c.top_p));
    }
    if c.min_p > 0.0 {
        parts.push(format!("min-p {}", c.min_p));
    }
    if c.eta > 0.0 {
        parts.push(format!("η {}", c.eta));
    }
    if c.repetition_penalty != 1.0 {
        let window = match c.penalty_window {
            0 => String::new(),
            w => format!(" over the last {w} tokens"),
        };
        parts.push(format!("penalty {}{window}", c.repetition_penalty));
    }
    parts.push(format!("seed {}", c.seed));
    format!("sampled ({})", parts.join(", "))
}

/// Renders the report; `plot` is the SVG's file name next to it. The command shown is the one
/// that created the directory (`manifest.command`), plus `command_line` when it resumed it.
pub fn render_report(summary: &Summary, manifest: &Manifest, command_line: &str, plot: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Eval: {}\n", crate::manifest::names(&summary.method_order).replace(',', ", "));
    let _ = writeln!(md, "- model: `{}` ({})", manifest.model, manifest.engine);
    if let Some(machine) = &manifest.machine {
        let _ = writeln!(md, "- machine: {machine}");
    }
    if let Some([before, after]) = summary.host_peaks_gmac_s {
        let _ = writeln!(md, "- host: {}", crate::bench::host_drift_message(before, after));
    }
    let limit = manifest.limit.map_or_else(String::new, |k| format!(", first {k}"));
    let template = if manifest.chat_template { "chat template" } else { "raw text, no chat template" };
    let length = if manifest.ignore_eos { "exactly" } else { "at most" };
    let decoding = manifest.sampling.as_ref().map_or_else(|| "greedy".to_string(), sampling_label);
    let _ = writeln!(
        md,
        "- prompts: `{}`{limit} ({template}); {decoding}, {length} {} new tokens",
        manifest.prompts, manifest.max_new_tokens
    );
    let order = match manifest.turn_tokens {
        Some(k) => format!("side by side, taking turns on the machine every {k} new tokens (decode times count each method's own turns)"),
        None => "one after another (`ar` first)".to_string(),
    };
    let _ = writeln!(md, "- each prompt's methods ran {order}");
    let _ = writeln!(md, "- params: {}", method_params(manifest));
    let ties = summary.mismatches.iter().filter(|m| m.near_tie).count();
    let verdict = match (summary.lossless, ties) {
        (true, _) if summary.sampled => "not compared token for token: sampled, each method keeps the target's distribution but draws other tokens than ar (the distribution tests of `draftsmith-decode` check it)".to_string(),
        (true, 0) => "yes: every method's output equals ar's on every prompt".to_string(),
        (true, n) => format!("yes: every output equals ar's up to {n} near-tie(s) of this backend (see below)"),
        (false, _) => "**NO** (see below)".to_string(),
    };
    let _ = writeln!(md, "- lossless: {verdict}\n");
    md.push_str("| method | prompts | tokens | τ tokens/step | acceptance % | MAT (mean accepted) | mean tree size | Util % | draft calls/token | speedup | 95 % interval | speedup (with prefill) | ms/token | draft ms/step | verify ms/step | commit ms/step | distinct-1/2/3/4 | lossless |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|\n");
    for (name, s) in summary.iter() {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.prompts,
            s.output_tokens,
            s.tokens_per_step,
            num(s.acceptance_pct, 1),
            num(s.mean_accepted, 2),
            num(s.mean_tree_size, 1),
            num(s.utilization.map(|u| 100.0 * u), 1),
            if s.draft_calls > 0 { num(s.draft_calls_per_token, 2) } else { "–".to_string() },
            num(s.speedup, 2),
            interval(s.speedup_interval, 2),
            num(s.speedup_with_prefill, 2),
            num(s.decode_ms_per_token, 2),
            num(s.mean_draft_ms, 3),
            num(s.mean_verify_ms, 2),
            num(s.mean_commit_ms, 3),
            s.distinct_n.iter().map(|d| format!("{d:.2}")).collect::<Vec<_>>().join("/"),
            match (summary.sampled, s.lossless) {
                (true, true) => "sampled",
                (_, true) => "yes",
                (_, false) => "**no**",
            },
        );
    }
    md.push_str("\nτ counts the bonus token and the prefill call (AR = 1); acceptance % = 100·(τ−1)/draft_len; α = accepted ÷ (draft_len × steps) (TokenSwift's acceptance rate, draft_len = γ + 1) is in summary.json; MAT = draft tokens accepted per step; Util = accepted ÷ draft tokens the drafter generated (Post-use Table 4; phrases a token cache adds at the target are accepted without being generated); speedup = ar ms/token ÷ method ms/token on the same prompts (decode only, then with prefill); its 95 % interval is a percentile bootstrap over the prompts (2000 seeded resamples: the spread from which prompts were drawn and from the host's load prompt by prompt; none for a single prompt).\n");
    if !summary.relative.is_empty() {
        md.push_str("\nMethod against method: the decode speed of each over each earlier one in run order (`ar` aside), on the prompts both ran (above 1: the first named was faster), with the same bootstrap over prompts. Where the interval holds 1, this run does not tell the two apart.\n\n| method | over | prompts | speed ratio | 95 % interval |\n|---|---|---:|---:|---|\n");
        for r in &summary.relative {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                r.method,
                r.over,
                r.prompts,
                num(r.ratio, 3),
                interval(r.interval, 3)
            );
        }
    }
    let policy: Vec<String> = summary
        .iter()
        .filter_map(|(name, s)| {
            let get = |k: &str| s.extra.get(k).copied();
            Some(format!(
                "| {name} | {:.1} | {:.0} | {:.2} | {:.2} |",
                get("policy_mean_draft_nodes")?,
                get("policy_ar_steps_pct")?,
                get("policy_predicted_verify_ms")?,
                get("policy_measured_verify_ms")?
            ))
        })
        .collect();
    push_table(
        &mut md,
        "Draft policy `auto` (the part of each draft worth verifying on this machine): draft nodes kept per step, steps that drafted nothing (plain `ar` steps), and the cost model's predicted against the measured verify ms per step (means over steps).",
        "| method | nodes kept / step | ar steps % | predicted verify ms | measured verify ms |\n|---|---:|---:|---:|---:|",
        &policy,
    );
    push_draft_sizes(&mut md, summary);
    let post_use: Vec<String> = summary
        .iter()
        .filter_map(|(name, s)| {
            let get =
                |k: &str, digits: usize| s.extra.get(k).map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"));
            let keys = ["drafter_phrase_rows_per_call", "drafter_phrase_rows_matched_pct", "cache_tokens_accepted_pct"];
            keys.iter().any(|k| s.extra.contains_key(*k)).then(|| {
                let (gated, row, call) =
                    (get("drafter_calls_gated_pct", 1), get("drafter_phrase_row_ms", 2), get("drafter_call_ms", 2));
                format!(
                    "| {name} | {} | {} | {gated} | {row} / {call} | {} |",
                    get(keys[0], 2),
                    get(keys[1], 1),
                    get(keys[2], 1)
                )
            })
        })
        .collect();
    push_table(
        &mut md,
        "Post-use token caches: cached phrase tokens fed to the draft model beside its own token (extra rows of a drafter call) and the share of them it agreed with (each saves a call); under `auto`, the drafter calls whose phrases were left out because an extra row cost more than the agreement saved, and the measured ms of a phrase row and of a one-row call the gate priced them with; phrase tokens added to the target's tree (before the policy prunes) and the share the target accepted.",
        "| method | phrase rows / drafter call | rows matched % | calls gated off % | row / call ms | target-cache tokens accepted % |\n|---|---:|---:|---:|---:|---:|",
        &post_use,
    );
    let copies: Vec<String> = summary
        .iter()
        .filter_map(|(name, s)| {
            let get = |k: &str| s.extra.get(k).copied();
            Some(format!("| {name} | {:.1} | {:.1} |", get("copy_accepted_pct")?, get("copy_steps_pct")?))
        })
        .collect();
    push_table(
        &mut md,
        "The context's continuation drafted beside a drafter's own tokens (ReDrafter under `auto`, the draft-model methods with `--copy-context true`): the share of accepted draft tokens that only the copy drafted, and of steps that accepted one.",
        "| method | accepted tokens only copied % | steps accepting a copied token % |\n|---|---:|---:|",
        &copies,
    );
    let slower: Vec<String> = summary
        .iter()
        .filter_map(|(name, s)| s.speedup.filter(|&x| x < 1.0).map(|x| format!("{name} ({x:.2}× ar's decode speed)")))
        .collect();
    if !slower.is_empty() {
        let _ = writeln!(md, "\n**slower than ar: {}**", slower.join(", "));
    }
    if let Some(b) = &summary.near_tie_bound {
        let ties = summary.mismatches.iter().filter(|m| m.near_tie).count();
        let _ = writeln!(
            md,
            "\nLossless check on a backend that is not batch-invariant: drift between sequential and multi-token passes {:.3e} over {} logit rows; \
             a first difference where ar's top-2 margin is below {:.3e} ({}× the drift) is a near-tie, counted, not failed. Near-ties: {ties}.",
            b.drift, b.rows, b.bound, crate::lossless::NEAR_TIE_FACTOR
        );
    }
    let real: Vec<_> = summary.mismatches.iter().filter(|m| !m.near_tie).collect();
    let ties: Vec<_> = summary.mismatches.iter().filter(|m| m.near_tie).collect();
    for (title, list) in [("Lossless failures", real), ("Near-ties (not failures)", ties)] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(md, "\n## {title} ({})\n", list.len());
        for m in list.into_iter().take(MAX_LISTED) {
            let tok = |t: Option<u32>| t.map_or_else(|| "end of output".to_string(), |t| t.to_string());
            let margin = m.ar_margin.map(|x| format!(" (ar's top-2 margin {x:.3e})")).unwrap_or_default();
            let _ = writeln!(
                md,
                "- prompt `{}`, {}: position {}: ar {} vs {}{margin}",
                m.prompt_id,
                m.method,
                m.position,
                tok(m.ar_token),
                tok(m.method_token)
            );
        }
    }
    let _ = writeln!(md, "\n![tokens/step and speedup per method]({plot})\n");
    let _ = writeln!(md, "## Command\n\n```sh\n{}\n```", manifest.command);
    if command_line != manifest.command {
        let _ = writeln!(md, "\nLast resumed by:\n\n```sh\n{command_line}\n```");
    }
    md
}

/// The parameters of the methods that ran (not every field of `MethodParams`).
fn method_params(manifest: &Manifest) -> String {
    let p = &manifest.params;
    let has = |m: Method| manifest.methods.contains(&m);
    let mut parts = Vec::new();
    if manifest.methods.iter().any(|&m| matches!(m, Method::PromptLookup | Method::TokenCache) || m.uses_draft_model())
    {
        parts.push(format!("draft_len = {}, lookup_ngram = {}", p.draft_len, p.lookup_ngram));
    }
    if has(Method::NgramTrie) {
        parts.push(format!(
            "ngram_n = {}, ngram_lp = {}, num_draft = {}, ngram_update_output = {}",
            p.ngram_n, p.ngram_lp, p.num_draft, p.ngram_update_output
        ));
    }
    if let Some(d) = &p.draft_model {
        let vocab = p.draft_vocab.map_or_else(|| "all".to_string(), |n| n.to_string());
        let mut part = format!("draft_model = {d}, draft_weights = {}, draft_vocab = {vocab}", p.draft_weights);
        // How a draft model picks its tokens matters only when the run samples.
        if manifest.sampling.as_ref().is_some_and(|s| !s.is_greedy()) {
            part.push_str(&format!(", draft_tokens = {}", p.draft_tokens));
        }
        parts.push(part);
    }
    if has(Method::ReDrafter) {
        parts.push(format!(
            "drafter = {}, beam_width = {}, beam_length = {}, tree_attention = {}",
            p.drafter.as_deref().unwrap_or("none"),
            p.beam_width,
            p.beam_length,
            p.tree_attention
        ));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

/// Appends a paragraph `intro` and a table (`header` and its separator line, then `rows`), or
/// nothing when there are no rows.
fn push_table(md: &mut String, intro: &str, header: &str, rows: &[String]) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(md, "\n{intro}\n\n{header}\n");
    for row in rows {
        let _ = writeln!(md, "{row}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::record;
    use crate::summary::summarize;

    #[test]
    fn slower_methods_and_failures_are_spelled_out() {
        let mut ar = record("p1", "ar", &[1, 2, 3], &[]);
        ar.decode_ms = 10.0;
        let mut pl = record("p1", "prompt-lookup", &[1, 2, 4], &[(0, 1), (0, 1)]);
        pl.decode_ms = 20.0;
        let summary = summarize(&[ar, pl], &[Method::Ar, Method::PromptLookup]);
        let manifest = crate::manifest::tests_support::manifest();
        let md = render_report(&summary, &manifest, "draftsmith eval --methods ar,prompt-lookup", "plot.svg");
        let resumed = render_report(&summary, &manifest, "draftsmith eval", "plot.svg");
        assert!(md.contains("slower than ar: prompt-lookup (0.50×"), "{md}");
        assert!(md.contains("prompt `p1`, prompt-lookup: position 2: ar 3 vs 4"), "{md}");
        assert!(
            md.contains("```sh\ndraftsmith eval\n```")
                && md.contains("Last resumed by:\n\n```sh\ndraftsmith eval --methods"),
            "{md}"
        );
        assert!(!resumed.contains("Last resumed by"), "{resumed}");
        assert!(md.contains("| prompt-lookup | 1 | 3 | 1.000 | 0.0 | 0.00 | 4.0 | 0.0 | 1.33 | 0.50 |"), "{md}");
    }

    #[test]
    fn post_use_cache_rates_get_their_own_table() {
        let ar = record("p1", "ar", &[1, 2, 3], &[]);
        let mut pu = record("p1", "post-use", &[1, 2, 3], &[(1, 1)]);
        pu.extra.insert("drafter_phrase_rows_per_call".into(), 1.375);
        pu.extra.insert("drafter_phrase_rows_matched_pct".into(), 14.4);
        pu.extra.insert("cache_tokens_accepted_pct".into(), 0.5);
        pu.extra.insert("drafter_calls_gated_pct".into(), 31.25);
        pu.extra.insert("drafter_phrase_row_ms".into(), 1.7);
        pu.extra.insert("drafter_call_ms".into(), 9.75);
        let summary = summarize(&[ar, pu], &[Method::Ar, Method::PostUse]);
        let manifest = crate::manifest::tests_support::manifest();
        let md = render_report(&summary, &manifest, "draftsmith eval", "plot.svg");
        assert!(md.contains("| post-use | 1.38 | 14.4 | 31.2 | 1.70 / 9.75 | 0.5 |"), "{md}");
        let plain = summarize(&[record("p1", "ar", &[1, 2, 3], &[])], &[Method::Ar]);
        let md = render_report(&plain, &manifest, "draftsmith eval", "plot.svg");
        assert!(!md.contains("phrase rows"), "{md}");
    }

    #[test]
    fn the_copied_continuations_share_gets_its_own_table() {
        let ar = record("p1", "ar", &[1, 2, 3], &[]);
        let mut rd = record("p1", "redrafter", &[1, 2, 3], &[(1, 1)]);
        rd.extra.insert("copy_accepted_pct".into(), 41.0);
        rd.extra.insert("copy_steps_pct".into(), 30.0);
        let manifest = crate::manifest::tests_support::manifest();
        let md = render_report(&summarize(&[ar, rd], &[Method::Ar, Method::ReDrafter]), &manifest, "x", "p.svg");
        assert!(md.contains("| redrafter | 41.0 | 30.0 |"), "{md}");
        let plain = summarize(&[record("p1", "ar", &[1, 2, 3], &[])], &[Method::Ar]);
        assert!(!render_report(&plain, &manifest, "x", "p.svg").contains("only copied"));
    }

    #[test]
    fn a_draft_models_settings_are_named_and_its_draft_tokens_when_sampling() {
        let summary = summarize(&[record("p1", "ar", &[1, 2, 3], &[])], &[Method::Ar]);
        let mut manifest = crate::manifest::tests_support::manifest();
        manifest.params.draft_model = Some("qwen2.5-coder-0.5b".into());
        manifest.params.draft_vocab = Some(65536);
        let md = render_report(&summary, &manifest, "x", "p.svg");
        assert!(md.contains("draft_model = qwen2.5-coder-0.5b, draft_weights = q4_0, draft_vocab = 65536"), "{md}");
        assert!(!md.contains("draft_tokens"), "greedy: how drafts are picked does not matter");
        manifest.sampling = Some(draftsmith_decode::SamplingConfig { temperature: 0.7, ..Default::default() });
        let md = render_report(&summary, &manifest, "x", "p.svg");
        assert!(md.contains("draft_vocab = 65536, draft_tokens = sample"), "{md}");
    }

    #[test]
    fn the_machine_is_named_when_recorded() {
        let summary = summarize(&[record("p1", "ar", &[1, 2], &[])], &[Method::Ar]);
        let mut manifest = crate::manifest::tests_support::manifest();
        assert!(!render_report(&summary, &manifest, "x", "p.svg").contains("- machine:"), "older manifests have none");
        manifest.machine = Some(crate::manifest::machine_line());
        let md = render_report(&summary, &manifest, "x", "p.svg");
        assert!(md.contains("- machine: ") && md.contains(" threads; kernels "), "{md}");
        assert!(!md.contains("- host:"), "no peaks probed (a dense backend, an older summary)");
    }

    #[test]
    fn a_loud_host_is_named() {
        let mut summary = summarize(&[record("p1", "ar", &[1, 2], &[])], &[Method::Ar]);
        let manifest = crate::manifest::tests_support::manifest();
        summary.host_peaks_gmac_s = Some([700.0, 690.0]);
        assert!(render_report(&summary, &manifest, "x", "p.svg")
            .contains("- host: instruction peak before / after the run: 700 / 690 GMAC/s (a steady host)"));
        summary.host_peaks_gmac_s = Some([700.0, 350.0]);
        assert!(render_report(&summary, &manifest, "x", "p.svg")
            .contains("- host: warning: the instruction peak moved from 700 to 350"));
    }

    #[test]
    fn draft_sizes_get_a_row_per_drafting_method() {
        let ar = record("p1", "ar", &[1, 2, 3, 4], &[]);
        let pl = record("p1", "prompt-lookup", &[1, 2, 3, 4], &[(0, 1), (1, 2)]);
        let manifest = crate::manifest::tests_support::manifest();
        let md = render_report(&summarize(&[ar, pl], &[Method::Ar, Method::PromptLookup]), &manifest, "x", "p.svg");
        assert!(
            md.contains("| method | 0 | 1 | 2 | 3–4 | 5–8 | 9–16 | 17–32 | 33+ | mean by quarter of the answer |"),
            "{md}"
        );
        assert!(
            md.contains("| prompt-lookup | 0.0 | 0.0 | 0.0 | 100.0 | 0.0 | 0.0 | 0.0 | 0.0 | – / 4.0 / 4.0 / – |"),
            "{md}"
        );
        assert!(!md.contains("| ar | 0.0"), "ar has no draft sizes: {md}");
    }
}
