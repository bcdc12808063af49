//! `draftsmith export`: writes a run's drafter (its final export, or its last checkpoint) in
//! draftsmith's layout or, for a ReDrafter, in the reference layout other runtimes load.

use std::path::PathBuf;

use anyhow::{bail, Result};
use burn::backend::Flex;
use clap::Args;
use draftsmith_heads::WeightDtype;
use draftsmith_train::{export_drafter, export_needs_target, run_drafter, ExportFormat, ExportOptions, ExportTarget};

use crate::backend::DeviceKind;
use crate::model_arg::{ActivationsArg, KvKeysArg, ModelArgs};
use crate::out::outln;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A training run directory (`draftsmith train … --out`).
    pub run: PathBuf,
    /// Output directory (default: `<run>/export`, or `<run>/export-reference`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `draftsmith`: the compact layout draftsmith reads (`drafter.safetensors`, f32, tied head and
    /// draft vocabulary kept). `reference`: a ReDrafter as apple/ml-recurrent-drafter and
    /// TensorRT-LLM load it (`model.safetensors`, full `[vocab, exit_dim]` output layer).
    #[arg(long, default_value_t = ExportFormat::Draftsmith)]
    pub format: ExportFormat,
    /// Weight dtype of a `reference` export: f32 (exact), f16 or bf16.
    #[arg(long, default_value_t = WeightDtype::F32)]
    pub dtype: WeightDtype,
    /// The target model: checked against the one the drafter was trained for, and needed for a
    /// `reference` export of a tied head (its LM head is folded into the output layer). Same forms
    /// as `--model` elsewhere.
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// With `--format reference`: also write `probe.safetensors` (four input rows and the logits
    /// draftsmith computes for them), for checking the export in another runtime
    /// (`scripts/check_reference_export.py`).
    #[arg(long)]
    pub probe: bool,
}

pub fn run(args: ExportArgs) -> Result<()> {
    let source = run_drafter(&args.run)?;
    if source != args.run {
        eprintln!(
            "{}: training has not finished (no final drafter): exporting its last checkpoint ({})",
            args.run.display(),
            source.display()
        );
    }
    let device = Default::default();
    let model = match (&args.model, export_needs_target(&source, args.format)?) {
        (Some(model), _) => Some(model.clone()),
        (None, true) => bail!(
            "{}: the drafter's output layer is tied to its target's LM head; pass the target with --model \
             so that --format reference can write the full layer",
            source.join(draftsmith_heads::redrafter::CONFIG_FILE).display()
        ),
        (None, false) => None,
    };
    let target = match model {
        Some(model) => {
            let model_args = ModelArgs {
                model,
                device: DeviceKind::Cpu,
                weights: None,
                activations: ActivationsArg::Int8,
                kv_keys: KvKeysArg::Float,
            };
            let loaded = model_args.load::<Flex>(&device)?;
            let identity = draftsmith_decode::drafters::target_identity(&loaded)?;
            Some(ExportTarget { identity, lm_head: loaded.model.lm_head_matrix().transpose() })
        }
        None => None,
    };
    let suffix = match args.format {
        ExportFormat::Draftsmith => "export",
        ExportFormat::Reference => "export-reference",
    };
    let out = args.out.unwrap_or_else(|| args.run.join(suffix));
    let options = ExportOptions { format: args.format, dtype: args.dtype, probe: args.probe };
    let exported = export_drafter::<Flex>(&source, &out, options, target.as_ref(), &device)?;
    let trained_for = exported.target.as_ref().map_or("an unnamed target".to_string(), |t| {
        format!("{} (sha256 {}…)", t.name, &t.sha256[..12.min(t.sha256.len())])
    });
    outln!(
        "exported a {} for {trained_for} in the {} layout to {}",
        exported.description,
        exported.format,
        out.display()
    )?;
    for file in &exported.files {
        let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        outln!("  {} ({})", file.display(), indicatif::HumanBytes(bytes))?;
    }
    Ok(())
}
