//! Tensor-name tables: which tensors an architecture needs, and how GGUF names map to the
//! Hugging Face names the engine uses as its canonical names. Data, not code paths.

use crate::config::ModelConfig;

/// Global tensors: (GGUF name, HF name).
const GLOBAL: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output.weight", "lm_head.weight"),
];

/// Per-layer tensors: (GGUF suffix after `blk.N.`, HF suffix after `model.layers.N.`).
const LAYER: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.bias", "self_attn.v_proj.bias"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
];

/// Buffers some HF checkpoints carry that are derived from the config (`rotary_emb.inv_freq`),
/// so they are neither needed nor a sign of a wrong architecture.
pub fn is_derived_buffer(name: &str) -> bool {
    name.ends_with("rotary_emb.inv_freq")
}

/// GGUF tensor holding Llama 3.1 per-frequency RoPE divisors; read into the config.
pub const GGUF_ROPE_FREQS: &str = "rope_freqs.weight";

/// Maps a GGUF tensor name to its HF name, if it is one the engine knows.
pub fn gguf_to_hf(name: &str) -> Option<String> {
    if let Some((_, hf)) = GLOBAL.iter().find(|(g, _)| *g == name) {
        return Some((*hf).to_string());
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (_, hf) = LAYER.iter().find(|(g, _)| *g == suffix)?;
    Some(format!("model.layers.{layer}.{hf}"))
}

/// Maps an HF name back to GGUF (used for error messages about GGUF files).
pub fn hf_to_gguf(name: &str) -> Option<String> {
    if let Some((g, _)) = GLOBAL.iter().find(|(_, h)| *h == name) {
        return Some((*g).to_string());
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let (g, _) = LAYER.iter().find(|(_, h)| *h == suffix)?;
    Some(format!("blk.{layer}.{g}"))
}

/// HF names of every tensor the configuration needs, in load order.
pub fn expected_tensors(config: &ModelConfig) -> Vec<String> {
    let mut names = vec!["model.embed_tokens.weight".to_string(), "model.norm.weight".to_string()];
    if !config.tie_word_embeddings {
        names.push("lm_head.weight".to_string());
    }
    for layer in 0..config.num_layers {
        for (_, hf) in LAYER {
            if hf.ends_with(".bias") && !config.architecture.qkv_bias() {
                continue;
            }
            names.push(format!("model.layers.{layer}.{hf}"));
        }
    }
    names
}

/// Expected shape of a tensor in HF (PyTorch, `[out, in]`) order.
pub fn expected_shape(config: &ModelConfig, name: &str) -> Option<Vec<usize>> {
    let h = config.hidden_size;
    let q = config.num_heads * config.head_dim;
    let kv = config.num_kv_heads * config.head_dim;
    let f = config.intermediate_size;
    let v = config.vocab_size;
    let suffix = name.strip_prefix("model.layers.").and_then(|r| r.split_once('.')).map(|(_, s)| s);
    let shape = match (name, suffix) {
        ("model.embed_tokens.weight" | "lm_head.weight", _) => vec![v, h],
        ("model.norm.weight", _) => vec![h],
        (_, Some("input_layernorm.weight" | "post_attention_layernorm.weight")) => vec![h],
        (_, Some("self_attn.q_proj.weight")) => vec![q, h],
        (_, Some("self_attn.k_proj.weight" | "self_attn.v_proj.weight")) => vec![kv, h],
        (_, Some("self_attn.o_proj.weight")) => vec![h, q],
        (_, Some("self_attn.q_proj.bias")) => vec![q],
        (_, Some("self_attn.k_proj.bias" | "self_attn.v_proj.bias")) => vec![kv],
        (_, Some("mlp.gate_proj.weight" | "mlp.up_proj.weight")) => vec![f, h],
        (_, Some("mlp.down_proj.weight")) => vec![h, f],
        _ => return None,
    };
    Some(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_and_hf_names_round_trip() {
        for g in ["token_embd.weight", "blk.12.attn_q.bias", "blk.0.ffn_down.weight", "output.weight"] {
            let hf = gguf_to_hf(g).unwrap();
            assert_eq!(hf_to_gguf(&hf).as_deref(), Some(g));
        }
        assert_eq!(gguf_to_hf("blk.3.attn_q.weight").unwrap(), "model.layers.3.self_attn.q_proj.weight");
        assert!(gguf_to_hf("blk.x.attn_q.weight").is_none());
        assert!(gguf_to_hf("mystery.weight").is_none());
    }
}
