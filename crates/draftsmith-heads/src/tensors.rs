//! Moving tensors between burn and safetensors (little-endian f32, PyTorch `[out, in]` layout).

use std::collections::HashMap;
use std::path::Path;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor, TensorData};
use safetensors::{tensor::TensorView, Dtype, SafeTensors};

use draftsmith_core::fsio::write_atomic;

use crate::error::HeadsError;

/// Named f32 tensors to write: name → (shape, values).
pub(crate) type Named = Vec<(String, Vec<usize>, Vec<f32>)>;

fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().expect("f32 tensor")
}

/// Appends a burn `Linear` (`[in, out]`) as `{prefix}.weight` (`[out, in]`) and `{prefix}.bias`.
pub(crate) fn push_linear<B: Backend>(out: &mut Named, prefix: &str, linear: &Linear<B>) {
    let w = linear.weight.val();
    let [d_in, d_out] = w.dims();
    out.push((format!("{prefix}.weight"), vec![d_out, d_in], values(w.transpose())));
    if let Some(b) = &linear.bias {
        out.push((format!("{prefix}.bias"), vec![d_out], values(b.val())));
    }
}

/// Float type of written weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// Exact: reading the file back gives the same drafter.
    #[default]
    F32,
    /// Half the bytes (round to nearest); TensorRT-LLM's default engine dtype.
    F16,
    /// Half the bytes (round to nearest); the dtype Apple's recipes train and run in.
    Bf16,
}

impl WeightDtype {
    /// The name `transformers` writes as `torch_dtype`.
    pub fn torch_name(self) -> &'static str {
        match self {
            WeightDtype::F32 => "float32",
            WeightDtype::F16 => "float16",
            WeightDtype::Bf16 => "bfloat16",
        }
    }

    fn encode(self, values: &[f32]) -> (Dtype, Vec<u8>) {
        match self {
            WeightDtype::F32 => (Dtype::F32, values.iter().flat_map(|x| x.to_le_bytes()).collect()),
            WeightDtype::F16 => {
                (Dtype::F16, values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect())
            }
            WeightDtype::Bf16 => {
                (Dtype::BF16, values.iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect())
            }
        }
    }
}

draftsmith_core::value_names!(WeightDtype, "weight dtype", { F32 => "f32", F16 => "f16", Bf16 => "bf16" });

pub(crate) fn write(path: &Path, tensors: &Named, metadata: Option<HashMap<String, String>>) -> Result<(), HeadsError> {
    write_typed(path, tensors, metadata, WeightDtype::F32)
}

pub(crate) fn write_typed(
    path: &Path,
    tensors: &Named,
    metadata: Option<HashMap<String, String>>,
    dtype: WeightDtype,
) -> Result<(), HeadsError> {
    let bytes: Vec<(Dtype, Vec<u8>)> = tensors.iter().map(|(_, _, v)| dtype.encode(v)).collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), (dt, b))| {
            (name.clone(), TensorView::new(*dt, shape.clone(), b).expect("consistent shape"))
        })
        .collect();
    let data = safetensors::serialize(views, &metadata)
        .map_err(|e| HeadsError::Safetensors { path: path.to_path_buf(), problem: e.to_string() })?;
    write_atomic(path, &data).map_err(|(at, source)| HeadsError::io(&at)(source))
}

/// Writes `dir/config.json` as pretty JSON, atomically.
pub(crate) fn write_config(dir: &Path, value: &impl serde::Serialize) -> Result<(), HeadsError> {
    let text = serde_json::to_string_pretty(value).expect("serializable") + "\n";
    write_atomic(&dir.join("config.json"), text.as_bytes()).map_err(|(at, source)| HeadsError::io(&at)(source))
}

/// Reads `dir/config.json`: its path and the JSON value.
pub(crate) fn read_config_value(dir: &Path) -> Result<(std::path::PathBuf, serde_json::Value), HeadsError> {
    let path = dir.join("config.json");
    if dir.is_file() {
        // A model file given where a drafter's directory belongs (`--drafter model.gguf`).
        let problem = "a file, not a drafter directory (`drafter.safetensors` + `config.json`, as `train` or `export` write; a draft model goes to --draft-model)";
        return Err(HeadsError::Config { path: dir.to_path_buf(), problem: problem.into() });
    }
    if !path.exists() {
        // Say which: a mistyped path, or a directory that holds no exported drafter (a training
        // run still under way, a dataset, a model directory).
        let problem = if dir.is_dir() {
            "no `config.json` here: not a drafter directory (`train` and `export` write `drafter.safetensors` + `config.json`)"
        } else {
            "no such drafter directory"
        };
        return Err(HeadsError::Config { path: dir.to_path_buf(), problem: problem.into() });
    }
    let text = std::fs::read_to_string(&path).map_err(HeadsError::io(&path))?;
    let value =
        serde_json::from_str(&text).map_err(|e| HeadsError::Config { path: path.clone(), problem: e.to_string() })?;
    Ok((path, value))
}

/// Reads `dir/config.json` as a drafter of `kind` (its `drafter` field), typed as `T`.
pub(crate) fn read_config<T: serde::de::DeserializeOwned>(
    dir: &Path,
    kind: crate::DrafterKind,
) -> Result<(std::path::PathBuf, T), HeadsError> {
    let (path, mut value) = read_config_value(dir)?;
    let found =
        crate::identity::declared_kind(&value).map_err(|problem| HeadsError::Config { path: path.clone(), problem })?;
    if found != kind {
        return Err(HeadsError::Config {
            path,
            problem: format!(
                "`drafter` is `{found}`, expected `{kind}` (a {found} drafter cannot be loaded as {kind})"
            ),
        });
    }
    if let Some(map) = value.as_object_mut() {
        map.entry("drafter").or_insert_with(|| kind.to_string().into());
    }
    let file =
        serde_json::from_value(value).map_err(|e| HeadsError::Config { path: path.clone(), problem: e.to_string() })?;
    Ok((path, file))
}

/// A read safetensors file: every tensor as f32, with the names that were taken.
pub(crate) struct Reader<'a> {
    path: &'a Path,
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl<'a> Reader<'a> {
    pub(crate) fn open(path: &'a Path) -> Result<Self, HeadsError> {
        let bytes = std::fs::read(path).map_err(HeadsError::io(path))?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| HeadsError::Safetensors {
            path: path.to_path_buf(),
            problem: format!("{e} (truncated, or another format?)"),
        })?;
        let mut tensors = HashMap::new();
        for (name, view) in st.tensors() {
            let data = view.data();
            let vals: Vec<f32> = match view.dtype() {
                Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
                Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
                Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
                other => {
                    return Err(HeadsError::Safetensors {
                        path: path.to_path_buf(),
                        problem: format!("tensor `{name}` has unsupported dtype {other:?}"),
                    })
                }
            };
            tensors.insert(name, (view.shape().to_vec(), vals));
        }
        Ok(Self { path, tensors })
    }

    pub(crate) fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, HeadsError> {
        let (found, vals) = self
            .tensors
            .remove(name)
            .ok_or_else(|| HeadsError::MissingTensor { path: self.path.to_path_buf(), name: name.into() })?;
        if found != shape {
            return Err(HeadsError::Shape {
                path: self.path.to_path_buf(),
                name: name.into(),
                expected: shape.to_vec(),
                found,
            });
        }
        // A drafter whose training diverged decodes garbage, or stops the beam search on a NaN.
        if let Some((index, &value)) = vals.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(HeadsError::NonFinite { path: self.path.to_path_buf(), name: name.into(), index, value });
        }
        Ok(vals)
    }

    /// Reads `{prefix}.weight` (`[out, in]`) and, when `bias`, `{prefix}.bias` into a burn `Linear`.
    pub(crate) fn linear<B: Backend>(
        &mut self,
        prefix: &str,
        d_in: usize,
        d_out: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Linear<B>, HeadsError> {
        let w = self.take(&format!("{prefix}.weight"), &[d_out, d_in])?;
        let w = Tensor::<B, 2>::from_data(TensorData::new(w, [d_out, d_in]), device).transpose();
        let w = Tensor::from_data(w.into_data(), device);
        let b = if bias {
            let b = self.take(&format!("{prefix}.bias"), &[d_out])?;
            Some(Param::from_tensor(Tensor::<B, 1>::from_data(TensorData::new(b, [d_out]), device)))
        } else {
            None
        };
        Ok(Linear { weight: Param::from_tensor(w), bias: b })
    }

    /// Fails on tensors nobody took.
    pub(crate) fn finish(self, kind: &str) -> Result<(), HeadsError> {
        match self.tensors.into_keys().min() {
            Some(name) => Err(HeadsError::UnusedTensor { path: self.path.to_path_buf(), name, kind: kind.into() }),
            None => Ok(()),
        }
    }
}
