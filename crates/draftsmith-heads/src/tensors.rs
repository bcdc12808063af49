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

pub(crate) fn write(path: &Path, tensors: &Named, metadata: Option<HashMap<String, String>>) -> Result<(), HeadsError> {
    let bytes: Vec<Vec<u8>> =
        tensors.iter().map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            (name.clone(), TensorView::new(Dtype::F32, shape.clone(), b).expect("consistent shape"))
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
    let (path, value) = read_config_value(dir)?;
    let found = value.get("drafter").and_then(|v| v.as_str()).unwrap_or("");
    if found != kind.name() {
        return Err(HeadsError::Config {
            path,
            problem: format!(
                "`drafter` is `{found}`, expected `{kind}` (a {found} drafter cannot be loaded as {kind})"
            ),
        });
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
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| HeadsError::Safetensors { path: path.to_path_buf(), problem: e.to_string() })?;
        let mut tensors = HashMap::new();
        for (name, view) in st.tensors() {
            let data = view.data();
            let vals: Vec<f32> = match view.dtype() {
                Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
                Dtype::F16 => data.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect(),
                Dtype::BF16 => data
                    .chunks_exact(2)
                    .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                    .collect(),
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

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if frac == 0 => sign,
        0 => {
            // Subnormal: renormalise.
            let mut e = 127 - 15 + 1;
            let mut f = frac;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((f & 0x3ff) << 13)
        }
        0x1f => sign | 0x7f80_0000 | (frac << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}
