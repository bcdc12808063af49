//! The reference checkpoint layout of a ReDrafter, as apple/ml-recurrent-drafter's
//! `modeling_drafter.Drafter` (a `transformers.PreTrainedModel` loaded with
//! `AutoModel.from_pretrained`) and TensorRT-LLM's `examples/redrafter/convert_checkpoint.py` read
//! it: `model.safetensors` beside a `config.json` whose `model_type` is
//! `recurrent_drafting_drafter`, a full output layer `lm_head.{N}.weight` of shape
//! `[vocab, exit_dim]`, and weights in any float type (the loaders cast).
//!
//! draftsmith's compact layout ties the output layer to the target's LM head and may restrict it
//! to a draft vocabulary; [`save_reference`] materializes the full layer from the LM head and
//! writes zero rows for tokens outside a draft vocabulary (the reference head has no way to rule
//! a token out, so those tokens get logit 0 there; the `draft_vocab` key stays in `config.json`
//! so that draftsmith, reading the export back, still proposes nothing outside it).

use std::path::Path;

use super::config::HeadKind;
use super::export::DrafterFile;
use super::model::{ReDrafter, VocabProjection};
use crate::error::HeadsError;
use crate::tensors::{write_config, write_typed, Named, WeightDtype};
use burn::tensor::{backend::Backend, Tensor};

/// Weights file of the reference layout (`transformers`' default name).
pub const REFERENCE_WEIGHTS_FILE: &str = "model.safetensors";
/// `model_type` of the reference's `DrafterConfig`.
pub const REFERENCE_MODEL_TYPE: &str = "recurrent_drafting_drafter";

/// Writes `dir/model.safetensors` and `dir/config.json` in the reference layout. `lm_head`: the
/// target's LM head as `[vocab, hidden]` rows, needed when `file.head` is tied.
pub fn save_reference<B: Backend>(
    dir: &Path,
    drafter: &ReDrafter<B>,
    file: &DrafterFile,
    lm_head: Option<Tensor<B, 2>>,
    dtype: WeightDtype,
) -> Result<(), HeadsError> {
    let config_path = dir.join("config.json");
    let n = drafter.blocks.len();
    let head = full_head_rows(drafter, file, lm_head)
        .map_err(|problem| HeadsError::Config { path: config_path.clone(), problem })?;
    draftsmith_core::fsio::create_dir(dir).map_err(HeadsError::io(dir))?;
    let mut named = super::export::body_tensors(drafter);
    named.push((format!("lm_head.{n}.weight"), vec![file.vocab_size, file.exit_dim], head));
    let metadata = [("format".to_string(), "pt".to_string())].into_iter().collect();
    write_typed(&dir.join(REFERENCE_WEIGHTS_FILE), &named, Some(metadata), dtype)?;
    // The fields the reference's `DrafterConfig` reads (`vocab_size`, `hidden_size`, `exit_dim`,
    // `num_draft_layers`, `rnn`) are draftsmith's own; `transformers` keeps the extra keys as
    // attributes and TensorRT-LLM ignores them.
    let full = DrafterFile { head: HeadKind::Full, ..file.clone() };
    let mut config = serde_json::to_value(&full).expect("serializable");
    let map = config.as_object_mut().expect("a JSON object");
    map.insert("model_type".into(), REFERENCE_MODEL_TYPE.into());
    map.insert("architectures".into(), serde_json::json!(["Drafter"]));
    // Unused by the reference's drafter; its `DrafterConfig` default.
    map.insert("num_lookback_tokens".into(), (-1).into());
    map.insert("torch_dtype".into(), dtype.torch_name().into());
    write_config(dir, &config)
}

/// The output layer as `[vocab, exit_dim]` row-major values (PyTorch layout), zero outside the
/// draft vocabulary.
fn full_head_rows<B: Backend>(
    drafter: &ReDrafter<B>,
    file: &DrafterFile,
    lm_head: Option<Tensor<B, 2>>,
) -> Result<Vec<f32>, String> {
    // burn's `Linear` weight is `[in, out]`: `[exit_dim, vocab]` (full) or `[exit_dim, hidden]`.
    let w = drafter.out.weight.val();
    let rows = match file.head {
        HeadKind::Full => w.transpose(),
        HeadKind::Tied => {
            let lm_head = lm_head.ok_or("a tied head needs the target's LM head (pass the target model)")?;
            let [vocab, hidden] = lm_head.dims();
            if vocab != file.vocab_size || hidden != file.hidden_size {
                return Err(format!(
                    "the target's LM head is [{vocab}, {hidden}], the drafter needs [{}, {}]",
                    file.vocab_size, file.hidden_size
                ));
            }
            // `[vocab, hidden] · [hidden, exit_dim]`.
            lm_head.matmul(w.transpose())
        }
    };
    let mut values = rows.into_data().convert::<f32>().to_vec::<f32>().expect("f32 tensor");
    if let Some(ids) = &file.draft_vocab {
        let e = file.exit_dim;
        let mut keep = vec![false; file.vocab_size];
        ids.iter().for_each(|&t| keep[t as usize] = true);
        for (row, kept) in values.chunks_mut(e).zip(keep) {
            if !kept {
                row.fill(0.0);
            }
        }
    }
    Ok(values)
}

/// File name of the probe [`write_probe`] writes.
pub const PROBE_FILE: &str = "probe.safetensors";

/// Writes `dir/probe.safetensors`: `rows` deterministic inputs and what draftsmith computes for
/// them, for checking that another runtime reads the export as the same function. Inputs:
/// `context` `[rows, hidden]` (the target's hidden state) and `token_embedding` `[rows, hidden]`;
/// outputs: `state` = the RNN state after one drafted token from the zero state, and `logits`
/// `[rows, vocab]` = the drafter's logits for `[context ; state]` (the tied head through
/// `lm_head`, and no draft-vocabulary mask: compare them where the exported output row is
/// non-zero).
pub fn write_probe<B: Backend>(
    dir: &Path,
    drafter: &ReDrafter<B>,
    file: &DrafterFile,
    lm_head: Option<Tensor<B, 2>>,
    rows: usize,
    device: &B::Device,
) -> Result<(), HeadsError> {
    use burn::tensor::TensorData;
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let h = file.hidden_size;
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut draw = |n: usize| (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect::<Vec<f32>>();
    let context = draw(rows * h);
    let embedding = draw(rows * h);
    let tensor = |v: &[f32]| Tensor::<B, 2>::from_data(TensorData::new(v.to_vec(), [rows, h]), device);
    let state = drafter.next_state(drafter.initial_state(rows, h, device), tensor(&embedding));
    let vocab = match (file.head, lm_head) {
        (HeadKind::Full, _) => VocabProjection::None,
        (HeadKind::Tied, Some(rows)) => VocabProjection::tied(&rows),
        (HeadKind::Tied, None) => {
            return Err(HeadsError::Config {
                path: dir.join(PROBE_FILE),
                problem: "a tied head needs the target's LM head for its logits".into(),
            })
        }
    };
    let logits = drafter.logits(tensor(&context), state.clone(), &vocab);
    let values = |t: Tensor<B, 2>| t.into_data().convert::<f32>().to_vec::<f32>().expect("f32 tensor");
    let named: Named = vec![
        ("context".into(), vec![rows, h], context),
        ("token_embedding".into(), vec![rows, h], embedding),
        ("state".into(), vec![rows, h], values(state)),
        ("logits".into(), vec![rows, file.vocab_size], values(logits)),
    ];
    write_typed(&dir.join(PROBE_FILE), &named, None, WeightDtype::F32)
}
