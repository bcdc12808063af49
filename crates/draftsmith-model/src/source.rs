//! Weight sources: a GGUF file or Hugging Face safetensors, both seen through HF tensor names
//! and HF (`[out, in]`) shapes, with llama.cpp's q/k row permutation undone.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use draftsmith_gguf::{dequant, GgmlType, GgufFile};
use draftsmith_kernels::{Activations, QFormat, QMatrix};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};

use crate::config::Architecture;
use crate::error::ModelError;
use crate::names;

/// Where the engine reads weights from (from several threads at once: the layers load in
/// parallel).
pub trait WeightSource: Sync {
    /// File (or directory) the weights come from, for error messages.
    fn path(&self) -> &Path;
    /// Every tensor in the source, under HF names where the name is known.
    fn names(&self) -> Vec<String>;
    /// HF-order shape of a tensor.
    fn shape(&self, name: &str) -> Option<Vec<usize>>;
    /// The tensor `name` (an HF name) as the source itself names it, for error messages.
    fn display_name(&self, name: &str) -> String {
        name.to_string()
    }
    /// An HF-order `shape` in the order the source itself stores dims, for error messages.
    fn display_shape(&self, shape: Vec<usize>) -> Vec<usize> {
        shape
    }
    /// Tensor values as f32, row-major in HF order.
    fn load_f32(&self, name: &str) -> Result<Vec<f32>, ModelError>;
    /// A tensor's bytes in the source's own block format, where it stores blocks that need no
    /// rearranging (GGUF: every tensor but llama.cpp's permuted q/k rows); `None` otherwise.
    fn load_blocks(&self, _name: &str) -> Result<Option<(GgmlType, Vec<u8>)>, ModelError> {
        Ok(None)
    }
    /// A 2-D weight ready for the quantized CPU kernels' products with `activations`: the
    /// file's own blocks when the kernels multiply them fast in that mode, otherwise blocks
    /// rewritten to a format they do (GGUF) or a matrix re-quantized to Q8_0 from its values.
    fn quant_weight(&self, name: &str, _activations: Activations) -> Result<QuantWeight<'_>, ModelError> {
        let shape = self.shape(name).unwrap_or_default();
        let values = self.load_f32(name)?;
        quantize(self.path(), name, &values, &shape).map(QuantWeight::Matrix)
    }

    /// A 2-D weight as a quantized CPU matrix for products with `activations` (see
    /// [`WeightSource::quant_weight`]).
    fn load_quant(&self, name: &str, activations: Activations) -> Result<QMatrix, ModelError> {
        let mut parts = self.load_quant_parts(&[name], activations)?;
        Ok(parts.pop().expect("one matrix per name at most"))
    }

    /// Several 2-D weights that multiply the same input (q, k and v; gate and up), as few
    /// matrices as their formats allow: consecutive weights of one block format and width
    /// become one matrix of their rows one after another, packed straight from the file's
    /// blocks (no second copy of the weights while loading).
    fn load_quant_parts(&self, names: &[&str], activations: Activations) -> Result<Vec<QMatrix>, ModelError> {
        let weights = names.iter().map(|n| self.quant_weight(n, activations)).collect::<Result<Vec<_>, _>>()?;
        stack_runs(self.path(), &names.join(", "), weights)
    }
}

/// `weights` as few matrices as their formats allow: each run of consecutive weights that stack
/// ([`QuantWeight::stacks_with`]) becomes one matrix. `tensors` names them in errors.
pub(crate) fn stack_runs(
    path: &Path,
    tensors: &str,
    weights: Vec<QuantWeight<'_>>,
) -> Result<Vec<QMatrix>, ModelError> {
    let mut runs: Vec<Vec<QuantWeight<'_>>> = Vec::new();
    for weight in weights {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|prev| prev.stacks_with(&weight)) => run.push(weight),
            _ => runs.push(vec![weight]),
        }
    }
    runs.into_iter().map(|run| QuantWeight::pack(run).map_err(|e| tensor_err(path, tensors, e.to_string()))).collect()
}

/// A weight on its way to the quantized kernels ([`WeightSource::quant_weight`]).
pub enum QuantWeight<'a> {
    /// GGUF-format blocks of `format`, row-major: the source file's own bytes where they need
    /// no rewriting.
    Blocks { format: QFormat, bytes: Cow<'a, [u8]>, rows: usize, cols: usize },
    /// A matrix built already (re-quantized from the weight's values).
    Matrix(QMatrix),
}

impl QuantWeight<'_> {
    /// One matrix of a run of weights that stack ([`QuantWeight::stacks_with`]): blocks packed
    /// straight into it, a lone matrix as it is, matrices copied together.
    fn pack(mut run: Vec<Self>) -> Result<QMatrix, draftsmith_kernels::KernelError> {
        if let [Self::Blocks { format, cols, .. }, ..] = run.as_slice() {
            let (format, cols) = (*format, *cols);
            let parts: Vec<(&[u8], usize)> = run
                .iter()
                .map(|w| match w {
                    Self::Blocks { bytes, rows, .. } => (bytes.as_ref(), *rows),
                    Self::Matrix(_) => unreachable!("a run holds one kind"),
                })
                .collect();
            return QMatrix::from_ggml_parts(format, &parts, cols);
        }
        if run.len() == 1 {
            return match run.pop() {
                Some(Self::Matrix(m)) => Ok(m),
                _ => unreachable!("a run of blocks is packed above"),
            };
        }
        let parts: Vec<&QMatrix> = run
            .iter()
            .map(|w| match w {
                Self::Matrix(m) => m,
                Self::Blocks { .. } => unreachable!("a run holds one kind"),
            })
            .collect();
        Ok(QMatrix::stack(&parts).expect("a run's matrices stack"))
    }

    /// `(format, rows, cols)`.
    fn shape(&self) -> (QFormat, usize, usize) {
        match self {
            Self::Blocks { format, rows, cols, .. } => (*format, *rows, *cols),
            Self::Matrix(m) => (m.format(), m.rows(), m.cols()),
        }
    }

    /// Whether `next` can follow this weight's rows in one matrix: the same kind, format and
    /// width, and this weight's rows fill whole row groups.
    fn stacks_with(&self, next: &Self) -> bool {
        let ((f, rows, cols), (nf, _, ncols)) = (self.shape(), next.shape());
        let same_kind =
            matches!((self, next), (Self::Blocks { .. }, Self::Blocks { .. }) | (Self::Matrix(_), Self::Matrix(_)));
        same_kind && f == nf && cols == ncols && rows.is_multiple_of(QMatrix::ROW_GROUP)
    }
}

fn quantize(path: &Path, name: &str, values: &[f32], shape: &[usize]) -> Result<QMatrix, ModelError> {
    let [rows, cols] = shape else {
        return Err(tensor_err(path, name, format!("expected a matrix, found shape {shape:?}")));
    };
    check_finite(path, name, values)?;
    QMatrix::quantize_q8_0(values, *rows, *cols).map_err(|e| tensor_err(path, name, e.to_string()))
}

/// Refuses a tensor holding a NaN or infinite value, naming the first: the int8 activations
/// would turn a NaN into finite numbers, so a damaged tensor would decode fluent garbage rather
/// than fail the logits' check.
pub(crate) fn check_finite(path: &Path, name: &str, values: &[f32]) -> Result<(), ModelError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => {
            Err(tensor_err(path, name, format!("value {i} is {} (a damaged or badly converted model)", values[i])))
        }
        None => Ok(()),
    }
}

/// Rewrites a tensor's GGUF blocks into a block format the kernels multiply natively.
type Repack = fn(&[u8]) -> Vec<u8>;

fn tensor_err(path: &Path, name: &str, problem: String) -> ModelError {
    ModelError::Tensor { path: path.to_path_buf(), name: name.to_string(), problem }
}

/// Rows of `[rows, cols]` reordered from llama.cpp's rotary layout (pairs adjacent) back to the
/// HF layout (halves split): HF row `j·d/2 + i` of a head is GGUF row `2i + j`.
fn unpermute_rows<T: Copy>(data: &[T], rows: usize, n_heads: usize) -> Vec<T> {
    let row_len = data.len() / rows;
    let head_dim = rows / n_heads;
    let half = head_dim / 2;
    let mut out = Vec::with_capacity(data.len());
    for head in 0..n_heads {
        for r in 0..head_dim {
            let (j, i) = (r / half, r % half);
            let src = head * head_dim + 2 * i + j;
            out.extend_from_slice(&data[src * row_len..(src + 1) * row_len]);
        }
    }
    out
}

/// A GGUF file as a weight source.
pub struct GgufSource {
    file: GgufFile,
    architecture: Architecture,
    num_heads: usize,
    num_kv_heads: usize,
    /// HF name → GGUF name.
    map: BTreeMap<String, String>,
}

impl GgufSource {
    pub fn new(file: GgufFile, architecture: Architecture, num_heads: usize, num_kv_heads: usize) -> Self {
        let map = file
            .tensors()
            .iter()
            .map(|t| (names::gguf_to_hf(&t.name).unwrap_or_else(|| t.name.clone()), t.name.clone()))
            .collect();
        Self { file, architecture, num_heads, num_kv_heads, map }
    }

    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    fn info(&self, name: &str) -> Result<&draftsmith_gguf::TensorInfo, ModelError> {
        self.map.get(name).and_then(|g| self.file.tensor(g)).ok_or_else(|| ModelError::MissingTensors {
            path: self.file.path().to_path_buf(),
            names: self.display_name(name),
        })
    }

    /// The tensor's blocks as the file holds them, refused when a block's scale is NaN or
    /// infinite ([`dequant::first_non_finite_scale`]), naming its row and block.
    fn checked_bytes(&self, name: &str, info: &draftsmith_gguf::TensorInfo) -> Result<&[u8], ModelError> {
        let bytes = self.file.tensor_bytes(info);
        match dequant::first_non_finite_scale(info.dtype, bytes) {
            Some((block, scale)) => {
                let per_row = (info.dims.first().copied().unwrap_or(1) as usize / info.dtype.block_size()).max(1);
                let (row, block) = (block / per_row, block % per_row);
                let problem =
                    format!("row {row}, block {block}: its scale is {scale} (a damaged or badly converted model)");
                Err(tensor_err(self.path(), &self.display_name(name), problem))
            }
            None => Ok(bytes),
        }
    }

    /// Heads whose rows llama.cpp permuted for this tensor, if any.
    fn permuted_heads(&self, name: &str) -> Option<usize> {
        if self.architecture != Architecture::Llama {
            return None;
        }
        if name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.q_proj.bias") {
            Some(self.num_heads)
        } else if name.ends_with("self_attn.k_proj.weight") || name.ends_with("self_attn.k_proj.bias") {
            Some(self.num_kv_heads)
        } else {
            None
        }
    }
}

impl WeightSource for GgufSource {
    fn path(&self) -> &Path {
        self.file.path()
    }

    fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let info = self.info(name).ok()?;
        Some(info.dims.iter().rev().map(|&d| d as usize).collect())
    }

    /// The GGUF name: the file's own where it has the tensor, else the standard mapping.
    fn display_name(&self, name: &str) -> String {
        self.map.get(name).cloned().or_else(|| names::hf_to_gguf(name)).unwrap_or_else(|| name.to_string())
    }

    /// ggml order: fastest-varying dim first.
    fn display_shape(&self, mut shape: Vec<usize>) -> Vec<usize> {
        shape.reverse();
        shape
    }

    fn load_f32(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let info = self.info(name)?;
        let values = self.file.dequantize(&info.name)?;
        Ok(match self.permuted_heads(name) {
            Some(heads) => {
                let rows = if info.dims.len() == 2 { info.dims[1] as usize } else { values.len() };
                unpermute_rows(&values, rows, heads)
            }
            None => values,
        })
    }

    fn load_blocks(&self, name: &str) -> Result<Option<(GgmlType, Vec<u8>)>, ModelError> {
        let info = self.info(name)?;
        let bytes = self.checked_bytes(name, info)?;
        Ok(self.permuted_heads(name).is_none().then(|| (info.dtype, bytes.to_vec())))
    }

    fn quant_weight(&self, name: &str, activations: Activations) -> Result<QuantWeight<'_>, ModelError> {
        let info = self.info(name)?;
        // Formats the kernels multiply natively are kept (Q4_0, Q5_0, Q4_K, Q5_K and Q6_K where their
        // kernels are fast: int8 activations); otherwise Q4_0 / Q5_0 become Q8_0 exactly and Q4_K
        // becomes Q4_1 (same nibbles, sub-block scales rounded to f16) without a detour through
        // f32; the rest is re-quantized to Q8_0 from its values.
        let (format, repack): (QFormat, Option<Repack>) = match info.dtype {
            GgmlType::Q8_0 => (QFormat::Q8_0, None),
            GgmlType::Q4_1 => (QFormat::Q4_1, None),
            GgmlType::Q6_K if QFormat::Q6K.fast_in(activations) => (QFormat::Q6K, None),
            GgmlType::Q4_K if QFormat::Q4K.fast_in(activations) => (QFormat::Q4K, None),
            GgmlType::Q4_0 if QFormat::Q4_0.fast_in(activations) => (QFormat::Q4_0, None),
            GgmlType::Q5_0 if QFormat::Q5_0.fast_in(activations) => (QFormat::Q5_0, None),
            GgmlType::Q5_K if QFormat::Q5K.fast_in(activations) => (QFormat::Q5K, None),
            GgmlType::Q4_0 => (QFormat::Q8_0, Some(dequant::q4_0_as_q8_0)),
            GgmlType::Q5_0 => (QFormat::Q8_0, Some(dequant::q5_0_as_q8_0)),
            GgmlType::Q4_K => (QFormat::Q4_1, Some(dequant::q4_k_as_q4_1)),
            _ => {
                let shape = self.shape(name).unwrap_or_default();
                return quantize(self.path(), &self.display_name(name), &self.load_f32(name)?, &shape)
                    .map(QuantWeight::Matrix);
            }
        };
        let (cols, rows) = match info.dims.as_slice() {
            [c, r] => (*c as usize, *r as usize),
            dims => return Err(tensor_err(self.path(), name, format!("expected a matrix, found dims {dims:?}"))),
        };
        // The file's bytes are read in place where they need no rewriting (the packed matrix
        // is the one copy: a copy first would be a second pass over fresh pages).
        let bytes = self.checked_bytes(name, info)?;
        let bytes: Cow<'_, [u8]> = match self.permuted_heads(name) {
            Some(heads) => Cow::Owned(unpermute_rows(bytes, rows, heads)),
            None => Cow::Borrowed(bytes),
        };
        let bytes = match repack {
            Some(repack) if bytes.len().is_multiple_of(info.dtype.type_size()) => Cow::Owned(repack(&bytes)),
            Some(_) => {
                return Err(tensor_err(
                    self.path(),
                    name,
                    format!("{} bytes are not whole {} blocks", bytes.len(), info.dtype),
                ))
            }
            None => bytes,
        };
        Ok(QuantWeight::Blocks { format, bytes, rows, cols })
    }
}

/// One or more `.safetensors` files of a Hugging Face model directory.
pub struct SafetensorsSource {
    dir: PathBuf,
    files: Vec<(PathBuf, Mmap)>,
    /// Tensor name → index into `files`.
    index: BTreeMap<String, usize>,
}

impl SafetensorsSource {
    /// Opens `model.safetensors`, or every shard listed in `model.safetensors.index.json`.
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        let index_path = dir.join("model.safetensors.index.json");
        let shard_names: Vec<String> = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(|e| ModelError::io(&index_path, e))?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| ModelError::Safetensors { path: index_path.clone(), problem: e.to_string() })?;
            let map = json.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| ModelError::Safetensors {
                path: index_path.clone(),
                problem: "no `weight_map` object".into(),
            })?;
            let mut shards: Vec<String> = map.values().filter_map(|v| v.as_str().map(String::from)).collect();
            shards.sort();
            shards.dedup();
            shards
        } else {
            vec!["model.safetensors".to_string()]
        };
        let mut files = Vec::new();
        let mut index = BTreeMap::new();
        for shard in shard_names {
            let path = dir.join(&shard);
            let file = std::fs::File::open(&path).map_err(|e| ModelError::io(&path, e))?;
            // SAFETY: the file is opened read-only and not modified while mapped.
            let mmap = unsafe { Mmap::map(&file) }.map_err(|e| ModelError::io(&path, e))?;
            let tensors = SafeTensors::deserialize(&mmap).map_err(|e| ModelError::Safetensors {
                path: path.clone(),
                problem: format!("not a readable safetensors file ({e}: truncated, or another format?)"),
            })?;
            for name in tensors.names() {
                index.insert(name.to_string(), files.len());
            }
            files.push((path, mmap));
        }
        Ok(Self { dir: dir.to_path_buf(), files, index })
    }

    fn view(&self, name: &str) -> Result<(PathBuf, safetensors::tensor::TensorView<'_>), ModelError> {
        let &i = self
            .index
            .get(name)
            .ok_or_else(|| ModelError::MissingTensors { path: self.dir.clone(), names: name.to_string() })?;
        let (path, mmap) = &self.files[i];
        let tensors = SafeTensors::deserialize(mmap)
            .map_err(|e| ModelError::Safetensors { path: path.clone(), problem: e.to_string() })?;
        let view =
            tensors.tensor(name).map_err(|e| ModelError::Safetensors { path: path.clone(), problem: e.to_string() })?;
        Ok((path.clone(), view))
    }
}

impl WeightSource for SafetensorsSource {
    fn path(&self) -> &Path {
        &self.dir
    }

    fn names(&self) -> Vec<String> {
        self.index.keys().cloned().collect()
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.view(name).ok().map(|(_, v)| v.shape().to_vec())
    }

    fn load_f32(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let (path, view) = self.view(name)?;
        let bytes = view.data();
        let values = match view.dtype() {
            Dtype::F32 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::BF16 => bytes.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            other => return Err(tensor_err(&path, name, format!("dtype {other:?} is not supported (F32, F16, BF16)"))),
        };
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        // llama.cpp: w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2): GGUF row 2i+j = HF row j*d/2+i.
        let (heads, head_dim, cols) = (2, 6, 3);
        let rows = heads * head_dim;
        let hf: Vec<u32> = (0..(rows * cols) as u32).collect();
        let mut gguf = vec![0; hf.len()];
        for h in 0..heads {
            for i in 0..head_dim / 2 {
                for j in 0..2 {
                    let (dst, src) = (h * head_dim + 2 * i + j, h * head_dim + j * head_dim / 2 + i);
                    gguf[dst * cols..(dst + 1) * cols].copy_from_slice(&hf[src * cols..(src + 1) * cols]);
                }
            }
        }
        assert_eq!(unpermute_rows(&gguf, rows, heads), hf);
    }

    #[test]
    fn parts_stack_where_their_rows_fill_whole_groups() {
        let mut src = MemorySource::new("<parts>");
        let values = |rows: usize, seed: usize| (0..rows * 64).map(|i| ((i * 7 + seed) % 13) as f32 - 6.0).collect();
        for (name, rows) in [("a", 32), ("b", 16), ("c", 7), ("d", 16)] {
            src.insert(name, vec![rows, 64], values(rows, rows));
        }
        let load = |names: &[&str]| src.load_quant_parts(names, Activations::Int8).unwrap();
        let rows = |ms: &[QMatrix]| ms.iter().map(QMatrix::rows).collect::<Vec<_>>();
        // a, b and c stack (only the last may end in a padded group); d starts a new matrix.
        let parts = load(&["a", "b", "c", "d"]);
        assert_eq!(rows(&parts), [55, 16]);
        let one = |name: &str| src.load_quant(name, Activations::Int8).unwrap();
        let x: Vec<f32> = (0..64).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut stacked = vec![0.0; 55];
        parts[0].matmul(&x, 1, &mut stacked);
        let mut want = Vec::new();
        for name in ["a", "b", "c"] {
            let m = one(name);
            let mut y = vec![0.0; m.rows()];
            m.matmul(&x, 1, &mut y);
            want.extend(y);
        }
        assert_eq!(stacked, want);
        assert_eq!(rows(&load(&["c", "a"])), [7, 32]);
        // Matrices (re-quantized ones, say) stack by the same rule: a run per format.
        let matrix = |name: &str, format: QFormat| QuantWeight::Matrix(one(name).requantize(format).unwrap());
        let weights = vec![matrix("a", QFormat::Q4_1), matrix("b", QFormat::Q4_1), matrix("d", QFormat::Q4_0)];
        let parts = stack_runs(Path::new("<parts>"), "a, b, d", weights).unwrap();
        assert_eq!(rows(&parts), [48, 16]);
        assert_eq!(parts.iter().map(QMatrix::format).collect::<Vec<_>>(), [QFormat::Q4_1, QFormat::Q4_0]);
    }
}

/// Tensors held in memory under HF names (tests, synthetic models, converted checkpoints).
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    name: PathBuf,
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

impl MemorySource {
    /// `name` stands in for a path in error messages.
    pub fn new(name: &str) -> Self {
        Self { name: PathBuf::from(name), tensors: BTreeMap::new() }
    }

    pub fn insert(&mut self, name: &str, shape: Vec<usize>, values: Vec<f32>) {
        assert_eq!(shape.iter().product::<usize>(), values.len(), "shape {shape:?} of {name}");
        self.tensors.insert(name.to_string(), (shape, values));
    }

    pub fn remove(&mut self, name: &str) -> Option<(Vec<usize>, Vec<f32>)> {
        self.tensors.remove(name)
    }

    /// Deterministic random weights for `config` (normal-ish, scaled by 1/√fan_in; norms near 1).
    pub fn random(config: &crate::ModelConfig, seed: u64) -> Self {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Sum of 4 uniforms: mean 0, variance 1/3 → scale to unit variance.
            let mut s = 0.0f32;
            for k in 0..4 {
                s += ((state >> (16 * k)) & 0xFFFF) as f32 / 65535.0 - 0.5;
            }
            s * 3.0f32.sqrt()
        };
        let mut src = Self::new("<random model>");
        for name in names::expected_tensors(config) {
            let shape = names::expected_shape(config, &name).expect("known tensor");
            let n: usize = shape.iter().product();
            let values: Vec<f32> = if shape.len() == 1 && name.ends_with("norm.weight") {
                (0..n).map(|_| 1.0 + 0.1 * next()).collect()
            } else {
                let scale = if shape.len() == 2 { 1.0 / (shape[1] as f32).sqrt() } else { 0.1 };
                (0..n).map(|_| scale * next()).collect()
            };
            src.insert(&name, shape, values);
        }
        src
    }
}

impl WeightSource for MemorySource {
    fn path(&self) -> &Path {
        &self.name
    }

    fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.tensors.get(name).map(|(s, _)| s.clone())
    }

    fn load_f32(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        self.tensors
            .get(name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| ModelError::MissingTensors { path: self.name.clone(), names: name.to_string() })
    }
}
