//! `draftsmith reproduce <recipe.toml>`: the recipe runner ([`draftsmith_eval::reproduce`])
//! with the distill, train and eval stages of the other subcommands ([`crate::jobs`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use draftsmith_eval::{run_recipe, DrafterRecipe, GridPoint, Recipe, RecipeEvent, RecipeStages};

use crate::eval_args::EvalArgs;
use crate::jobs::{distill::DistillJob, train::TrainJob};
use crate::model_arg::{KvKeysArg, ModelArgs, DEFAULT_MODEL};

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
    /// Only check the recipe (its keys, every grid point's values, that the files and
    /// directories it names exist) and list its grid points; drafters and models are loaded, and
    /// so checked, when the first point that uses them runs.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ReproduceArgs) -> Result<()> {
    let (recipe, points) = Recipe::read(&args.recipe)?;
    if let Some((what, path)) = recipe.missing_inputs(&points).into_iter().next() {
        anyhow::bail!("{}: {what}: {} does not exist", args.recipe.display(), path.display());
    }
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
        kv_keys: KvKeysArg::Float,
    };
    let mut stages = Stages { recipe: &recipe, model };
    let table = run_recipe(&recipe, &args.recipe, &points, &args.results, &mut stages, &mut |event| match event {
        RecipeEvent::Trained { drafter, run } => eprintln!("drafter `{drafter}`: trained ({})", run.display()),
        RecipeEvent::Distilling { drafter: d, data } => {
            eprintln!(
                "drafter `{}`: distilling {} conversations of {} into {}",
                d.name,
                d.limit,
                d.data,
                data.display()
            )
        }
        RecipeEvent::Training { drafter, run } => eprintln!("drafter `{drafter}`: training into {}", run.display()),
        RecipeEvent::Point { index, total, label } => eprintln!("[{index}/{total}] {label}"),
    })?;
    println!("{}", table.display());
    Ok(())
}

/// The recipe's stages, run as the `distill`, `train redrafter` and `eval` subcommands would.
struct Stages<'a> {
    recipe: &'a Recipe,
    model: ModelArgs,
}

impl RecipeStages for Stages<'_> {
    type Error = anyhow::Error;

    fn distill(&mut self, d: &DrafterRecipe, data: &Path) -> Result<()> {
        let job = DistillJob {
            model: self.model.clone(),
            data: d.data.clone(),
            limit: d.limit,
            out: data.to_path_buf(),
            config: d.distill.clone(),
            shard: None,
            json: false,
        };
        crate::jobs::distill::run(&job).with_context(|| format!("drafter `{}`", d.name))
    }

    fn train(&mut self, d: &DrafterRecipe, data: &Path, run: &Path) -> Result<()> {
        let job = TrainJob {
            model: self.model.clone(),
            data: data.to_path_buf(),
            out: run.to_path_buf(),
            config: d.train.clone(),
            limit: None,
            max_seq_len: d.distill.max_seq_len,
            hidden: crate::jobs::train::HiddenSource::Auto,
        };
        crate::jobs::train::run(&job).with_context(|| format!("drafter `{}`", d.name))
    }

    fn eval(&mut self, point: &GridPoint, out: &Path, reuse_ar_from: Option<&Path>) -> Result<()> {
        let recipe = self.recipe;
        let args = EvalArgs {
            model: self.model.clone(),
            methods: recipe.methods.clone(),
            prompts: recipe.prompts.clone(),
            limit: recipe.limit,
            max_new_tokens: recipe.max_new_tokens,
            no_chat_template: !recipe.chat_template,
            out: Some(out.to_path_buf()),
            json: false,
            reuse_ar_from: reuse_ar_from.map(Path::to_path_buf),
            ignore_eos: false,
            turn_tokens: None,
            params: point.params.clone(),
            sampling: Default::default(),
        };
        crate::jobs::eval::run(&args).with_context(|| format!("grid point {}", point.label))
    }
}
