//! `draftsmith export`: writes a run's drafter (its last checkpoint, or its final export) as
//! `drafter.safetensors` + `config.json` in the reference layout, after checking it loads.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use burn::backend::Flex;
use clap::Args;
use draftsmith_heads::redrafter::{load_redrafter, CONFIG_FILE, WEIGHTS_FILE};

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A training run directory (`draftsmith train … --out`).
    pub run: PathBuf,
    /// Output directory (default: `<run>/export`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: ExportArgs) -> Result<()> {
    let final_export = args.run.join(WEIGHTS_FILE);
    let checkpoint = args.run.join("checkpoint");
    let source = if final_export.exists() {
        args.run.clone()
    } else if checkpoint.join(WEIGHTS_FILE).exists() {
        checkpoint
    } else {
        bail!("{}: no exported drafter and no checkpoint (has `draftsmith train` run here?)", args.run.display());
    };
    let (_, file) = load_redrafter::<Flex>(&source, None, &Default::default())?;
    let out = args.out.unwrap_or_else(|| args.run.join("export"));
    std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
    for name in [WEIGHTS_FILE, CONFIG_FILE] {
        std::fs::copy(source.join(name), out.join(name))
            .with_context(|| format!("copying {} to {}", source.join(name).display(), out.display()))?;
    }
    let target = file.target.as_ref().map_or("unknown target".to_string(), |t| {
        format!("{} (sha256 {}…)", t.name, &t.sha256[..12.min(t.sha256.len())])
    });
    println!(
        "exported a ReDrafter ({:?} head, {} ResBlocks) for {target} to {}",
        file.head,
        file.num_draft_layers,
        out.display()
    );
    Ok(())
}
