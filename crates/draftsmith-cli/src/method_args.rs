//! Method names on the command line, and the drafters that the method parameters name, loaded
//! and checked against the target. The parameter flags themselves are derived from
//! [`MethodParams`] (the recipe keys) in `draftsmith-decode`.

use anyhow::Result;
use burn::tensor::backend::Backend;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use draftsmith_decode::{LoadedDrafters, Method, MethodParams};
use draftsmith_model::LoadedModel;

use crate::model_arg::ModelArgs;

/// Parses a method name (`--method`, `--methods`); `--help` lists the names.
pub fn method_parser() -> impl TypedValueParser<Value = Method> {
    PossibleValuesParser::new(Method::names()).map(|name| name.parse::<Method>().expect("a listed method name"))
}

/// Loads the drafters `params` names: a draft model (checked to share the target's tokenizer)
/// and a trained drafter (checked to be trained for this target; [`LoadedDrafters::load`]).
pub fn load_drafters<B: Backend>(
    params: &MethodParams,
    target: &LoadedModel<B>,
    model: &ModelArgs,
    device: &B::Device,
) -> Result<LoadedDrafters<B>> {
    let draft_model = match &params.draft_model {
        Some(spec) => {
            let args = ModelArgs { model: spec.clone(), ..model.clone() };
            Some(args.load_requantized::<B>(device, params.draft_weights.format())?)
        }
        None => None,
    };
    Ok(LoadedDrafters::load(target, draft_model, params.drafter.as_deref().map(std::path::Path::new), device)?)
}
