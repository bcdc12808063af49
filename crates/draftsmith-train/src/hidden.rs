//! The frozen target's final hidden states (after the final norm) for every training
//! sequence, computed once on the inner backend.

use burn::tensor::backend::Backend;
use draftsmith_model::{AttentionMask, Model};

use crate::error::TrainError;
use crate::examples::Sequence;

/// Hidden states of all sequences, row-major `[Σ len, hidden]`.
#[derive(Debug, Clone)]
pub struct HiddenStore {
    pub hidden: usize,
    data: Vec<f32>,
    offsets: Vec<usize>,
}

impl HiddenStore {
    /// The hidden state at `pos` of sequence `seq`.
    pub fn row(&self, seq: usize, pos: usize) -> &[f32] {
        let start = (self.offsets[seq] + pos) * self.hidden;
        &self.data[start..start + self.hidden]
    }

    pub fn len_tokens(&self) -> usize {
        self.data.len() / self.hidden.max(1)
    }
}

/// Runs the target over each sequence (one causal pass each); `progress(done_tokens)` is called
/// after each sequence.
pub fn compute_hidden<B: Backend>(
    model: &Model<B>,
    seqs: &[Sequence],
    progress: &mut dyn FnMut(usize),
) -> Result<HiddenStore, TrainError> {
    let hidden = model.config().hidden_size;
    let total: usize = seqs.iter().map(|s| s.tokens.len()).sum();
    let mut data = Vec::with_capacity(total * hidden);
    let mut offsets = Vec::with_capacity(seqs.len());
    let mut done = 0;
    for seq in seqs {
        offsets.push(done);
        let mut cache = model.new_cache(seq.tokens.len());
        let positions: Vec<usize> = (0..seq.tokens.len()).collect();
        let out = model.forward_hidden(&seq.tokens, &positions, &AttentionMask::Causal, &mut cache)?;
        data.extend(out.hidden_final.into_data().convert::<f32>().to_vec::<f32>().expect("f32 hidden states"));
        done += seq.tokens.len();
        progress(done);
    }
    Ok(HiddenStore { hidden, data, offsets })
}
