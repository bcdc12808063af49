//! `draftsmith reproduce <recipe.toml>`: one eval per grid point of a recipe (each resumable,
//! so finished points are skipped), then `eval/results/<name>/table.md` across the points.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use draftsmith_eval::{Recipe, Summary, SUMMARY_FILE};

use crate::commands::eval::{self, EvalArgs};
use crate::model_arg::{ModelArgs, DEFAULT_MODEL};

/// Run a recipe.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// The recipe file.
    pub recipe: PathBuf,
    /// Where results go (`<dir>/<recipe name>/<grid point>/`).
    #[arg(long, default_value = "eval/results")]
    pub results: PathBuf,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = crate::backend::DeviceKind::Cpu)]
    pub device: crate::backend::DeviceKind,
    /// Only validate the recipe and list its grid points.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ReproduceArgs) -> Result<()> {
    let (recipe, points) = Recipe::read(&args.recipe)?;
    eprintln!("{}: {} grid point(s)", args.recipe.display(), points.len());
    if args.dry_run {
        points.iter().for_each(|p| println!("{}", p.label));
        return Ok(());
    }
    // Every point decodes the same prompts with the same baseline: `ar` runs once, at the first point.
    let first_records = points.first().map(|p| recipe.point_dir(&args.results, p).join(draftsmith_eval::RECORDS_FILE));
    for (i, point) in points.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, points.len(), point.label);
        let out = recipe.point_dir(&args.results, point);
        eval::run(EvalArgs {
            model: ModelArgs { model: recipe.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string()), device: args.device, weights: None },
            methods: recipe.methods.clone(),
            prompts: recipe.prompts.clone(),
            limit: recipe.limit,
            max_new_tokens: recipe.max_new_tokens,
            no_chat_template: !recipe.chat_template,
            out: Some(out.clone()),
            json: false,
            reuse_ar_from: if i == 0 { None } else { first_records.clone() },
            params: (&point.params).into(),
        })
        .with_context(|| format!("grid point {}", point.label))?;
    }
    let table = combined_table(&recipe, &args, &points)?;
    let path = args.results.join(&recipe.name).join("table.md");
    std::fs::write(&path, table).with_context(|| format!("cannot write {}", path.display()))?;
    println!("{}", path.display());
    Ok(())
}

/// One row per (grid point, method) with τ, speedup and the lossless check.
fn combined_table(recipe: &Recipe, args: &ReproduceArgs, points: &[draftsmith_eval::GridPoint]) -> Result<String> {
    let mut t = String::new();
    writeln!(t, "# {}\n\n{}\n\nCommand: `draftsmith reproduce {}`\n", recipe.name, recipe.description, args.recipe.display())?;
    writeln!(t, "| grid point | method | τ (tokens/step) | speedup vs ar | speedup with prefill | lossless |\n|---|---|---|---|---|---|")?;
    for point in points {
        let path = recipe.point_dir(&args.results, point).join(SUMMARY_FILE);
        let summary: Summary = serde_json::from_str(&std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?)
            .with_context(|| format!("{}: not a summary", path.display()))?;
        for (name, m) in &summary.methods {
            writeln!(t, "| {} | {name} | {:.3} | {:.2}× | {:.2}× | {} |", point.label, m.tokens_per_step, m.speedup.unwrap_or(f64::NAN), m.speedup_with_prefill.unwrap_or(f64::NAN), if m.lossless { "yes" } else { "**no**" })?;
        }
    }
    Ok(t)
}
