//! `draftsmith reproduce <recipe.toml>`: one eval per grid point of a recipe (each resumable,
//! so finished points are skipped), then `eval/results/<name>/table.md` across the points.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use draftsmith_eval::{Recipe, Summary, SUMMARY_FILE};

use crate::commands::eval::{self, EvalArgs};
use crate::commands::{distill, train};
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
    /// Activations of the quantized CPU path (see `generate --help`).
    #[arg(long, value_enum, default_value_t = crate::model_arg::ActivationsArg::Int8)]
    pub activations: crate::model_arg::ActivationsArg,
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
    let model = ModelArgs {
        model: recipe.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string()),
        device: args.device,
        weights: None,
        activations: args.activations,
    };
    prepare_drafters(&recipe, &model)?;
    // Every point decodes the same prompts with the same baseline: unless the recipe says
    // otherwise, `ar` runs once, at the first point.
    let first_records = points.first().map(|p| recipe.point_dir(&args.results, p).join(draftsmith_eval::RECORDS_FILE));
    for (i, point) in points.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, points.len(), point.label);
        let out = recipe.point_dir(&args.results, point);
        eval::run(EvalArgs {
            model: model.clone(),
            methods: recipe.methods.clone(),
            prompts: recipe.prompts.clone(),
            limit: recipe.limit,
            max_new_tokens: recipe.max_new_tokens,
            no_chat_template: !recipe.chat_template,
            out: Some(out.clone()),
            json: false,
            reuse_ar_from: if i == 0 || !recipe.share_ar { None } else { first_records.clone() },
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

/// Distils and trains the recipe's drafters that are not trained yet (both stages resume).
fn prepare_drafters(recipe: &Recipe, model: &ModelArgs) -> Result<()> {
    for d in recipe.drafters.iter().filter(|d| d.path.is_none()) {
        let run = d.run_dir(&recipe.name);
        if run.join("summary.json").is_file() && run.join("drafter.safetensors").is_file() {
            eprintln!("drafter `{}`: trained ({})", d.name, run.display());
            continue;
        }
        let data = d.data_dir(&recipe.name);
        eprintln!("drafter `{}`: distilling {} conversations of {} into {}", d.name, d.limit, d.data, data.display());
        distill::distill_job(&distill::DistillJob {
            model: model.clone(),
            data: d.data.clone(),
            limit: d.limit,
            out: data.clone(),
            config: d.distill.clone(),
            json: false,
        })
        .with_context(|| format!("drafter `{}`", d.name))?;
        eprintln!("drafter `{}`: training into {}", d.name, run.display());
        train::train_job(&train::TrainJob {
            model: model.clone(),
            data,
            out: run,
            config: d.train.clone(),
            limit: None,
            max_seq_len: d.distill.max_seq_len,
        })
        .with_context(|| format!("drafter `{}`", d.name))?;
    }
    Ok(())
}

/// One row per (grid point, method) with τ, speedup and the lossless check.
fn combined_table(recipe: &Recipe, args: &ReproduceArgs, points: &[draftsmith_eval::GridPoint]) -> Result<String> {
    let mut t = String::new();
    writeln!(
        t,
        "# {}\n\n{}\n\nCommand: `draftsmith reproduce {}`\n",
        recipe.name,
        recipe.description,
        args.recipe.display()
    )?;
    writeln!(t, "| grid point | method | τ (tokens/step) | acceptance % | MAT | Util % | draft calls/token | verify tokens/step (packed) | unpacked W×L | speedup vs ar | speedup with prefill | draft ms/step | verify ms/step | lossless |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for point in points {
        let path = recipe.point_dir(&args.results, point).join(SUMMARY_FILE);
        let summary: Summary = serde_json::from_str(
            &std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?,
        )
        .with_context(|| format!("{}: not a summary", path.display()))?;
        let opt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
        for (name, m) in summary.iter() {
            let unpacked = if name == "redrafter" {
                (point.params.beam_width * point.params.beam_length).to_string()
            } else {
                "–".into()
            };
            writeln!(
                t,
                "| {} | {name} | {:.3} | {} | {} | {} | {} | {} | {unpacked} | {:.2}× | {:.2}× | {} | {} | {} |",
                point.label,
                m.tokens_per_step,
                opt(m.acceptance_pct, 1),
                opt(m.mean_accepted, 2),
                opt(m.utilization.map(|u| 100.0 * u), 1),
                if m.draft_calls > 0 { opt(m.draft_calls_per_token, 2) } else { "–".into() },
                opt(m.mean_tree_size.map(|s| 1.0 + s), 1),
                m.speedup.unwrap_or(f64::NAN),
                m.speedup_with_prefill.unwrap_or(f64::NAN),
                opt(m.mean_draft_ms, 2),
                opt(m.mean_verify_ms, 2),
                if m.lossless { "yes" } else { "**no**" }
            )?;
        }
    }
    Ok(t)
}
