//! `draftsmith reproduce <recipe.toml>`: the recipe runner ([`draftsmith_eval::reproduce`])
//! with the distill, train and eval stages of the other subcommands ([`crate::jobs`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_decode::Method;
use draftsmith_eval::{run_recipe, DrafterRecipe, GridPoint, Recipe, RecipeEvent, RecipeStages};

use crate::eval_args::EvalArgs;
use crate::jobs::{distill::DistillJob, train::TrainJob};
use crate::model_arg::{KvKeysArg, ModelArgs, DEFAULT_MODEL};
use crate::out::outln;

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
    /// Only check the recipe and list its grid points: its keys, every grid point's values, that
    /// the files and directories it names exist, and that the target and every drafter and
    /// draft model the grid names load and fit it (each loaded once; a drafter the recipe
    /// trains is checked once trained). Nothing is written.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ReproduceArgs) -> Result<()> {
    let (recipe, points) = Recipe::read(&args.recipe)?;
    if let Some((what, path)) = recipe.missing_inputs(&points).into_iter().next() {
        anyhow::bail!("{}: {what}: {} does not exist", args.recipe.display(), path.display());
    }
    if args.results.exists() && !args.results.is_dir() {
        anyhow::bail!(
            "--results {}: not a directory (results go to <dir>/{}/<grid point>/)",
            args.results.display(),
            recipe.name
        );
    }
    eprintln!("{}: {} grid point(s)", args.recipe.display(), points.len());
    let model = ModelArgs {
        model: recipe.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string()),
        device: args.device,
        weights: None,
        activations: args.activations,
        kv_keys: KvKeysArg::Float,
    };
    if args.dry_run {
        // A prompt file is read as the evals will read it (ids, texts); a dataset name is fetched then.
        let prompts = Path::new(&recipe.prompts);
        if prompts.is_file() {
            draftsmith_eval::read_prompts(prompts, recipe.limit)?;
        }
        crate::with_backend!(args.device, |B, device| check_drafters::<B>(&recipe, &points, &model, &device))?;
        for point in &points {
            outln!("{}", point.label)?;
        }
        return Ok(());
    }
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
    outln!("{}", table.display())?;
    Ok(())
}

/// Loads the target and each distinct drafter / draft model the grid points name, and checks
/// them for every method of the recipe as an eval does before its first prompt, so a wrong
/// drafter at the last point is found before the first one runs.
fn check_drafters<B: Backend>(
    recipe: &Recipe,
    points: &[GridPoint],
    model: &ModelArgs,
    device: &B::Device,
) -> Result<()> {
    for d in recipe.drafters.iter().filter(|d| d.path.is_none()) {
        d.check_made(&d.data_dir(&recipe.name), &d.run_dir(&recipe.name))?;
    }
    let target = model.load::<B>(device)?;
    let untrained: Vec<PathBuf> = recipe
        .drafters
        .iter()
        .filter(|d| d.path.is_none())
        .map(|d| d.run_dir(&recipe.name))
        .filter(|run| !DrafterRecipe::is_trained(run))
        .collect();
    let mut checked = Vec::new();
    for point in points {
        let mut params = point.params.clone();
        if params.drafter.as_deref().is_some_and(|d| untrained.contains(&PathBuf::from(d))) {
            params.drafter = None;
        }
        let key = (params.draft_model.clone(), params.draft_weights, params.drafter.clone());
        if (key.0.is_none() && key.2.is_none()) || checked.contains(&key) {
            continue;
        }
        let context = || format!("grid point {}", point.label);
        let drafters = crate::method_args::load_drafters(&params, &target, model, device).with_context(context)?;
        for &method in &recipe.methods {
            // A trained drafter's methods wait for the recipe to train it.
            let waits_for_training =
                matches!(method, Method::ReDrafter | Method::TokenSwift) && params.drafter.is_none();
            if !waits_for_training {
                draftsmith_decode::check_drafters(method, &params, drafters.as_drafters()).with_context(context)?;
            }
        }
        eprintln!("{}: drafters load and fit the target", point.label);
        checked.push(key);
    }
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
