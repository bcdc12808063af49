//! The reference export layout (apple/ml-recurrent-drafter, TensorRT-LLM): names, shapes and
//! config against a fixture written from the reference's documented format, the same drafter
//! logits when draftsmith reads the export back, reduced dtypes, and refusals.

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use draftsmith_heads::redrafter::{
    load_redrafter, read_drafter_file, save_redrafter, save_reference, write_probe, HeadKind, ReDrafter,
    ReDrafterConfig, VocabProjection,
};
use draftsmith_heads::{drafter_kind, DrafterKind, HeadsError, TargetIdentity, WeightDtype};
use serde_json::Value;

type B = Flex;

fn target() -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "cd".repeat(32), vocab_size: 40, hidden_size: 8 }
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-reference-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/reference-redrafter-layout.json")).unwrap()
}

/// A compact drafter saved in draftsmith's layout, read back with its config file.
fn compact(
    name: &str,
    head: HeadKind,
    draft_vocab: Option<&[u32]>,
) -> (ReDrafter<B>, draftsmith_heads::redrafter::DrafterFile) {
    let cfg = ReDrafterConfig::for_target(40, 8, head);
    let d = cfg.init::<B>(&Default::default(), 3);
    let dir = tmpdir(&format!("compact-{name}"));
    save_redrafter(&dir, &d, &cfg, &target(), draft_vocab, serde_json::json!({})).unwrap();
    load_redrafter::<B>(&dir, Some(&target()), &Default::default()).unwrap()
}

fn logits(d: &ReDrafter<B>, vocab: &VocabProjection<B>, h: &Tensor<B, 2>, e: &Tensor<B, 2>) -> Vec<f32> {
    let s = d.next_state(d.initial_state(3, 8, &Default::default()), e.clone());
    d.logits(h.clone(), s, vocab).into_data().to_vec::<f32>().unwrap()
}

fn names_and_shapes(path: &std::path::Path) -> (Vec<(String, Vec<usize>)>, Vec<safetensors::Dtype>) {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut v: Vec<(String, Vec<usize>)> = st.tensors().into_iter().map(|(n, t)| (n, t.shape().to_vec())).collect();
    v.sort();
    let dtypes = st.tensors().into_iter().map(|(_, t)| t.dtype()).collect();
    (v, dtypes)
}

#[test]
fn a_tied_drafter_exports_to_the_reference_layout_and_reads_back_as_the_same_function() {
    let dev = Default::default();
    let (d, file) = compact("tied", HeadKind::Tied, None);
    // The target's LM head as `[vocab, hidden]` rows.
    let lm_head = Tensor::<B, 2>::random([40, 8], Distribution::Normal(0.0, 1.0), &dev);
    let dir = tmpdir("tied");
    save_reference(&dir, &d, &file, Some(lm_head.clone()), WeightDtype::F32).unwrap();

    let fx = fixture();
    let weights = dir.join(fx["weights_file"].as_str().unwrap());
    let (found, dtypes) = names_and_shapes(&weights);
    let mut expected: Vec<(String, Vec<usize>)> = fx["tensors"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::from_value(v.clone()).unwrap()))
        .collect();
    expected.sort();
    assert_eq!(found, expected);
    assert!(dtypes.iter().all(|&t| t == safetensors::Dtype::F32));
    assert!(!dir.join("drafter.safetensors").exists(), "the reference layout has one weights file");

    let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], fx["model_type"]);
    assert_eq!(config["torch_dtype"], "float32");
    for field in fx["config_fields"].as_array().unwrap() {
        let field = field.as_str().unwrap();
        assert!(config.get(field).is_some(), "config.json lacks `{field}`");
    }
    for (k, v) in fx["example"].as_object().unwrap() {
        assert_eq!(&config[k], v, "config.json `{k}`");
    }

    // draftsmith reads the export back: a full head computing the tied drafter's logits.
    assert_eq!(drafter_kind(&dir).unwrap(), DrafterKind::ReDrafter);
    let (back, back_file) = load_redrafter::<B>(&dir, Some(&target()), &dev).unwrap();
    assert_eq!(back_file.head, HeadKind::Full);
    assert_eq!(back_file.target, file.target);
    let h = Tensor::<B, 2>::random([3, 8], Distribution::Normal(0.0, 1.0), &dev);
    let e = Tensor::<B, 2>::random([3, 8], Distribution::Normal(0.0, 1.0), &dev);
    let tied = logits(&d, &VocabProjection::tied(&lm_head), &h, &e);
    let full = logits(&back, &VocabProjection::None, &h, &e);
    let worst = tied.iter().zip(&full).map(|(a, b)| (a - b).abs() / (1.0 + a.abs())).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "reference export changes the logits by {worst}");

    // A reference checkpoint as Apple writes it (no draftsmith keys) also loads.
    let mut bare = config.as_object().unwrap().clone();
    for key in ["drafter", "head", "target", "training"] {
        bare.remove(key);
    }
    std::fs::write(dir.join("config.json"), serde_json::to_string(&bare).unwrap()).unwrap();
    let file = read_drafter_file(&dir).unwrap();
    assert_eq!((file.head, file.target), (HeadKind::Full, None));
    load_redrafter::<B>(&dir, Some(&target()), &dev).unwrap();
}

#[test]
fn a_draft_vocabulary_is_expanded_with_zero_rows_and_kept_in_the_config() {
    let dev = Default::default();
    let ids = [2u32, 5, 11, 30];
    let (d, file) = compact("vocab", HeadKind::Tied, Some(&ids));
    let lm_head = Tensor::<B, 2>::random([40, 8], Distribution::Normal(0.0, 1.0), &dev);
    let dir = tmpdir("vocab");
    save_reference(&dir, &d, &file, Some(lm_head), WeightDtype::F32).unwrap();
    let (back, back_file) = load_redrafter::<B>(&dir, None, &dev).unwrap();
    assert_eq!(back_file.draft_vocab.as_deref(), Some(&ids[..]));
    let w = back.out.weight.val().transpose().into_data().to_vec::<f32>().unwrap(); // [vocab, exit_dim]
    for (row, values) in w.chunks(16).enumerate() {
        let kept = ids.contains(&(row as u32));
        assert_eq!(values.iter().any(|&x| x != 0.0), kept, "row {row}");
    }
}

#[test]
fn reduced_dtypes_are_written_as_such_and_read_back_close() {
    let dev = Default::default();
    let (d, file) = compact("dtypes", HeadKind::Full, None);
    let exact = tmpdir("f32");
    save_reference(&exact, &d, &file, None, WeightDtype::F32).unwrap();
    let (a, _) = load_redrafter::<B>(&exact, None, &dev).unwrap();
    let a = a.out.weight.val().into_data().to_vec::<f32>().unwrap();
    for (dtype, st, torch, tol) in [
        (WeightDtype::F16, safetensors::Dtype::F16, "float16", 1e-3),
        (WeightDtype::Bf16, safetensors::Dtype::BF16, "bfloat16", 8e-3),
    ] {
        let dir = tmpdir(torch);
        save_reference(&dir, &d, &file, None, dtype).unwrap();
        let (_, dtypes) = names_and_shapes(&dir.join("model.safetensors"));
        assert!(dtypes.iter().all(|&t| t == st), "{dtype}");
        let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["torch_dtype"], torch);
        let (b, _) = load_redrafter::<B>(&dir, None, &dev).unwrap();
        let b = b.out.weight.val().into_data().to_vec::<f32>().unwrap();
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / x.abs().max(1e-2)).fold(0.0f32, f32::max);
        assert!(worst < tol, "{dtype}: relative error {worst}");
    }
}

#[test]
fn a_tied_head_without_the_target_is_refused_by_file_and_nothing_is_written() {
    let (d, file) = compact("refused", HeadKind::Tied, None);
    let dir = tmpdir("refused");
    let err = save_reference(&dir, &d, &file, None, WeightDtype::F32).unwrap_err();
    assert!(matches!(err, HeadsError::Config { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("config.json") && msg.contains("LM head"), "{msg}");
    assert!(!dir.exists());
    let err = write_probe(&dir, &d, &file, None, 2, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("probe.safetensors"), "{err}");
}

#[test]
fn the_probe_holds_inputs_and_the_drafter_outputs_for_them() {
    let dev = Default::default();
    let (d, file) = compact("probe", HeadKind::Full, None);
    let dir = tmpdir("probe");
    std::fs::create_dir_all(&dir).unwrap();
    write_probe(&dir, &d, &file, None, 4, &dev).unwrap();
    let bytes = std::fs::read(dir.join("probe.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let get = |name: &str| -> Vec<f32> {
        st.tensor(name).unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    };
    let h = Tensor::<B, 2>::from_data(burn::tensor::TensorData::new(get("context"), [4, 8]), &dev);
    let e = Tensor::<B, 2>::from_data(burn::tensor::TensorData::new(get("token_embedding"), [4, 8]), &dev);
    let s = d.next_state(d.initial_state(4, 8, &dev), e);
    assert_eq!(s.clone().into_data().to_vec::<f32>().unwrap(), get("state"));
    let l = d.logits(h, s, &VocabProjection::None).into_data().to_vec::<f32>().unwrap();
    assert_eq!(l, get("logits"));
    assert_eq!(st.tensor("logits").unwrap().shape(), [4, 40]);
}

#[test]
fn an_edited_draft_vocabulary_or_target_block_is_refused_naming_what_differs() {
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Tied);
    let d = cfg.init::<B>(&Default::default(), 3);
    let dir = tmpdir("edited");
    let training = serde_json::json!({ "config": { "draft_vocab": 4, "head": "tied" } });
    save_redrafter(&dir, &d, &cfg, &target(), Some(&[2, 5, 11, 30]), training).unwrap();
    read_drafter_file(&dir).unwrap();
    let config = dir.join("config.json");
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut c = original.clone();
        edit(&mut c);
        std::fs::write(&config, c.to_string()).unwrap();
        load_redrafter::<B>(&dir, Some(&target()), &Default::default()).err().map(|e| e.to_string())
    };
    // The list removed (or its key misspelt): the drafter would propose the whole vocabulary.
    let err = edited(&|c| {
        let ids = c.as_object_mut().unwrap().remove("draft_vocab").unwrap();
        c["draft_vocabs"] = ids;
    })
    .expect("refused");
    assert!(err.contains("config.json") && err.contains("no `draft_vocab` list") && err.contains("4 tokens"), "{err}");
    // More ids than training chose.
    let err = edited(&|c| c["draft_vocab"] = serde_json::json!([1, 2, 5, 11, 30])).expect("refused");
    assert!(err.contains("lists 5 tokens, more than the 4"), "{err}");
    // Fewer is what data with fewer distinct labels gives: taken.
    assert_eq!(edited(&|c| c["draft_vocab"] = serde_json::json!([2, 5])), None);
    // The target block's shapes edited: the message names them, not two identical targets.
    let err = edited(&|c| c["target"]["hidden_size"] = 9.into()).expect("refused");
    assert!(err.contains("`target` records vocab 40 / hidden 9") && err.contains("has vocab 40 / hidden 8"), "{err}");
}
