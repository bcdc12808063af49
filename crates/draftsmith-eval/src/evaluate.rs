//! One eval from start to end: check the directory, run what is missing, summarise every
//! record, write `summary.json`, `plot.svg` and `report.md`.

use std::collections::HashSet;
use std::path::Path;

use burn::tensor::backend::Backend;
use draftsmith_core::fsio::DirLock;
use draftsmith_decode::Drafters;
use draftsmith_model::Model;

use crate::error::EvalError;
use crate::lossless::{ar_margin, classify, measure_bound, LosslessCheck};
use crate::manifest::{check_ar_source, prepare_dir, write_atomic, Manifest};
use crate::plot::{render_plot, PLOT_FILE};
use crate::prompts::{check_context, EncodedPrompt};
use crate::records::{check_records, pending_pairs, read_records, Record, RecordLog, RECORDS_FILE};
use crate::report::render_report;
use crate::runner::{run_pending, Progress, RunSpec};
use crate::summary::{summarize, Summary};

/// File names of the summaries inside an eval directory.
pub const SUMMARY_FILE: &str = "summary.json";
pub const REPORT_FILE: &str = "report.md";

/// Resolved inputs of one eval.
#[derive(Debug, Clone, Copy)]
pub struct EvalInput<'a> {
    /// Where records and summaries go (created, or resumed when its manifest matches).
    pub out_dir: &'a Path,
    /// Methods, parameters and lengths come from here (methods resolved, `ar` first).
    pub manifest: &'a Manifest,
    pub prompts: &'a [EncodedPrompt],
    pub stop_tokens: &'a [u32],
    /// The exact command line, for the report.
    pub command_line: &'a str,
    /// Records of an earlier eval with the same model, prompts and length: its `ar` records
    /// are reused (when their prompt ids match) instead of decoding the baseline again.
    pub reuse_ar_from: Option<&'a Path>,
}

/// What an eval did.
#[derive(Debug, Clone)]
pub struct EvalOutcome {
    pub summary: Summary,
    /// Whether the directory held results of an earlier run of the same eval.
    pub resumed: bool,
    /// Pairs run now (the others were in the records already).
    pub ran: usize,
}

/// Runs the eval. A lossless failure is not an error here: it is in the summary (and every
/// record and report is written before the caller sees it).
pub fn evaluate<B: Backend>(
    model: &Model<B>,
    drafters: Drafters<'_, B>,
    input: &EvalInput<'_>,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<EvalOutcome, EvalError> {
    let manifest = input.manifest;
    check_context(input.prompts, model.config().max_position_embeddings)?;
    for &m in &manifest.methods {
        draftsmith_decode::validate_method(m, &manifest.params)?;
    }
    // Another eval's `ar` records are checked before this eval's directory is written.
    let reuse_ar_from = input.reuse_ar_from.filter(|p| p.exists());
    if let Some(other) = reuse_ar_from {
        check_ar_source(other, manifest)?;
    }
    let _lock = DirLock::acquire(input.out_dir, "eval")?;
    let resumed = prepare_dir(input.out_dir, manifest)?;
    let records_path = input.out_dir.join(RECORDS_FILE);
    let (mut log, existing) = RecordLog::open(&records_path)?;
    let ids: Vec<&str> = input.prompts.iter().map(|p| p.id.as_str()).collect();
    check_records(&records_path, &existing, &ids)?;
    let mut done: HashSet<(String, draftsmith_decode::Method)> = existing.iter().map(Record::key).collect();
    if let Some(other) = reuse_ar_from {
        for record in reusable_ar(other, input.prompts)? {
            if done.insert(record.key()) {
                log.append(&record)?;
            }
        }
    }
    let spec = RunSpec {
        methods: &manifest.methods,
        params: &manifest.params,
        max_new_tokens: manifest.max_new_tokens,
        stop_tokens: if manifest.ignore_eos { &[] } else { input.stop_tokens },
        turn_tokens: manifest.turn_tokens,
        sampling: manifest.sampling.as_ref(),
    };
    // The host's vector throughput before and after the run: a loud neighbour on a shared
    // machine slows multi-token passes more than plain steps, so the speedups then read low.
    // A rerun that finds every pair done runs nothing: peaks would describe no run, so the
    // summary keeps those of the run that wrote the records.
    let peak = || model.activations().map(draftsmith_kernels::probe::instruction_peak).filter(|&p| p > 0.0);
    let pending = pending_pairs(&ids, &manifest.methods, &done);
    let before = if pending.is_empty() { None } else { peak() };
    run_pending(model, drafters, input.prompts, &spec, &mut log, &pending, on_progress)?;
    let peaks = match pending.is_empty() {
        true => previous_host_peaks(input.out_dir),
        false => before.zip(peak()).map(|(b, a)| [b, a]),
    };
    drop(log);
    let records = read_records(&records_path)?;
    let mut summary = summarize(&records, &manifest.methods);
    summary.host_peaks_gmac_s = peaks;
    if manifest.sampling.is_some() {
        summary.mark_sampled();
    } else if LosslessCheck::for_model(model) == LosslessCheck::NearTie {
        check_near_ties(model, input.prompts, &records, &mut summary)?;
    }
    write_outputs(input.out_dir, &summary, manifest, input.command_line)?;
    Ok(EvalOutcome { summary, resumed, ran: pending.len() })
}

/// The `ar` records of `prompts` (same id, same prompt tokens) in another eval's records file
/// `path`; refused, before any is taken, when it holds two of one prompt (which would be used
/// depends on their order).
fn reusable_ar(path: &Path, prompts: &[EncodedPrompt]) -> Result<Vec<Record>, EvalError> {
    let mut taken: Vec<Record> = Vec::new();
    for record in read_records(path)? {
        let same_prompt = prompts.iter().any(|p| p.id == record.prompt_id && p.ids == record.prompt_ids);
        if !record.method.is_ar() || !same_prompt {
            continue;
        }
        if taken.iter().any(|r| r.prompt_id == record.prompt_id) {
            return Err(EvalError::Records {
                path: path.to_path_buf(),
                problem: format!(
                    "holds two `ar` records of prompt `{}`, where an eval writes one; remove one of them before \
                     reusing its `ar` records",
                    record.prompt_id
                ),
            });
        }
        taken.push(record);
    }
    Ok(taken)
}

/// Measures the backend's drift on `ar`'s outputs and classifies every mismatch by `ar`'s margin.
fn check_near_ties<B: Backend>(
    model: &Model<B>,
    prompts: &[EncodedPrompt],
    records: &[Record],
    summary: &mut Summary,
) -> Result<(), EvalError> {
    let ar_output = |id: &str| records.iter().find(|r| r.method.is_ar() && r.prompt_id == id).map(|r| &r.output_ids);
    let bound = measure_bound(model, prompts, &|p| ar_output(&p.id).cloned())?;
    classify(summary, bound, &mut |m| {
        let prompt = prompts.iter().find(|p| p.id == m.prompt_id).expect("a mismatch's prompt is in the eval");
        ar_margin(model, prompt, ar_output(&m.prompt_id).expect("a mismatch has an ar record"), m.position)
    })
}

/// The host peaks an earlier run wrote into `dir`'s summary (`None` where there is none).
fn previous_host_peaks(dir: &Path) -> Option<[f64; 2]> {
    let text = std::fs::read_to_string(dir.join(SUMMARY_FILE)).ok()?;
    serde_json::from_str::<Summary>(&text).ok()?.host_peaks_gmac_s
}

/// Writes `summary.json`, `plot.svg` and `report.md` into `dir`.
pub fn write_outputs(dir: &Path, summary: &Summary, manifest: &Manifest, command_line: &str) -> Result<(), EvalError> {
    write_atomic(&dir.join(SUMMARY_FILE), &serde_json::to_string_pretty(summary).expect("summary serializes"))?;
    write_atomic(&dir.join(PLOT_FILE), &render_plot(summary)?)?;
    write_atomic(&dir.join(REPORT_FILE), &render_report(summary, manifest, command_line, PLOT_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_nothing_finds_the_host_peaks_of_the_run_before() {
        let dir = std::env::temp_dir().join(format!("draftsmith-eval-{}-peaks", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(previous_host_peaks(&dir), None, "no summary yet");
        let mut summary = summarize(&[], &[]);
        summary.host_peaks_gmac_s = Some([700.0, 350.0]);
        std::fs::write(dir.join(SUMMARY_FILE), serde_json::to_string(&summary).unwrap()).unwrap();
        assert_eq!(previous_host_peaks(&dir), Some([700.0, 350.0]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
