//! ReDrafter module: export → import gives identical logits, reference key names, target
//! checks, and a few optimiser steps fit a tiny teacher-forced problem.

use burn::backend::{Autodiff, Flex};
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use draftsmith_heads::redrafter::{
    load_redrafter, save_redrafter, teacher_forced_loss, HeadKind, ReDrafterConfig, SoftLabels, TrainBatch,
    VocabProjection,
};
use draftsmith_heads::{HeadsError, TargetIdentity};

mod common;
use common::spread;

type B = Flex;
type AB = Autodiff<Flex>;

fn target(vocab: usize, hidden: usize) -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "ab".repeat(32), vocab_size: vocab, hidden_size: hidden }
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-heads-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn step_logits<Bk: burn::tensor::backend::Backend>(
    d: &draftsmith_heads::redrafter::ReDrafter<Bk>,
    emb: &Tensor<Bk, 2>,
    vocab: &VocabProjection<Bk>,
    h: Tensor<Bk, 2>,
    tokens: &[i32],
) -> Vec<f32> {
    let dev = h.device();
    let [rows, hidden] = h.dims();
    let mut s = d.initial_state(rows, hidden, &dev);
    let mut out = Vec::new();
    for &t in tokens {
        let ids = Tensor::<Bk, 1, Int>::from_data(TensorData::new(vec![t; rows], [rows]), &dev);
        s = d.next_state(s, emb.clone().select(0, ids));
        out.extend(d.logits(h.clone(), s.clone(), vocab).into_data().to_vec::<f32>().unwrap());
    }
    out
}

#[test]
fn export_import_gives_identical_logits_for_both_heads_and_reference_names() {
    let dev = Default::default();
    for head in [HeadKind::Full, HeadKind::Tied] {
        for rnn in [true, false] {
            let cfg = ReDrafterConfig::for_target(40, 8, head).with_rnn(rnn);
            let d = cfg.init::<B>(&dev, 1);
            let emb = Tensor::<B, 2>::random([40, 8], Distribution::Normal(0.0, 1.0), &dev);
            let vocab = match head {
                HeadKind::Full => VocabProjection::None,
                HeadKind::Tied => VocabProjection::tied(&emb),
            };
            let h = Tensor::<B, 2>::random([3, 8], Distribution::Normal(0.0, 1.0), &dev);
            let before = step_logits(&d, &emb, &vocab, h.clone(), &[1, 5, 7]);
            let dir = tmpdir(&format!("rt-{head:?}-{rnn}"));
            save_redrafter(&dir, &d, &cfg, &target(40, 8), None, serde_json::json!({"steps": 0})).unwrap();
            let (back, file) = load_redrafter::<B>(&dir, Some(&target(40, 8)), &dev).unwrap();
            assert_eq!(file.config(), cfg);
            assert_eq!(step_logits(&back, &emb, &vocab, h, &[1, 5, 7]), before, "{head:?} rnn={rnn}");

            let bytes = std::fs::read(dir.join("drafter.safetensors")).unwrap();
            let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
            let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
            names.sort();
            let mut expected = vec![
                "lm_head.0.linear.bias",
                "lm_head.0.linear.weight",
                "lm_head.1.linear.bias",
                "lm_head.1.linear.weight",
                "lm_head.2.weight",
            ];
            if rnn {
                expected.extend(["rnn_u.bias", "rnn_u.weight", "rnn_w.weight"]);
            }
            expected.sort();
            assert_eq!(names, expected);
            let out_rows = if head == HeadKind::Full { 40 } else { 8 };
            assert_eq!(st.tensor("lm_head.2.weight").unwrap().shape(), &[out_rows, 16], "PyTorch [out, in] layout");
        }
    }
}

#[test]
fn a_drafter_for_another_target_is_refused() {
    let dev = Default::default();
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Tied);
    let dir = tmpdir("mismatch");
    save_redrafter(&dir, &cfg.init::<B>(&dev, 1), &cfg, &target(40, 8), None, serde_json::Value::Null).unwrap();
    let mut other = target(40, 8);
    other.sha256 = "cd".repeat(32);
    let err = load_redrafter::<B>(&dir, Some(&other), &dev).unwrap_err();
    assert!(matches!(err, HeadsError::TargetMismatch { .. }), "{err}");
    assert!(err.to_string().contains("config.json"), "{err}");
    let err = load_redrafter::<B>(&dir, Some(&target(41, 8)), &dev).unwrap_err();
    assert!(err.to_string().contains("vocab 40"), "{err}");
}

#[test]
fn a_missing_or_empty_drafter_directory_is_named() {
    let dev = Default::default();
    let dir = tmpdir("not-a-drafter");
    std::fs::create_dir_all(&dir).unwrap();
    let err = load_redrafter::<B>(&dir, None, &dev).unwrap_err().to_string();
    assert!(err.contains("not-a-drafter") && err.contains("not a drafter directory"), "{err}");
    let err = load_redrafter::<B>(&dir.join("typo"), None, &dev).unwrap_err().to_string();
    assert!(err.contains("typo") && err.contains("no such drafter directory"), "{err}");
}

#[test]
fn a_truncated_weights_file_is_a_clear_error() {
    let dev = Default::default();
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Full);
    let dir = tmpdir("trunc");
    save_redrafter(&dir, &cfg.init::<B>(&dev, 1), &cfg, &target(40, 8), None, serde_json::Value::Null).unwrap();
    let path = dir.join("drafter.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_redrafter::<B>(&dir, None, &dev).unwrap_err();
    assert!(err.to_string().contains("drafter.safetensors"), "{err}");
}

#[test]
fn a_drafter_with_a_nan_weight_is_refused_naming_the_tensor() {
    let dev = Default::default();
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Full);
    let dir = tmpdir("nan");
    save_redrafter(&dir, &cfg.init::<B>(&dev, 1), &cfg, &target(40, 8), None, serde_json::Value::Null).unwrap();
    let path = dir.join("drafter.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = load_redrafter::<B>(&dir, None, &dev).unwrap_err().to_string();
    assert!(err.contains("drafter.safetensors") && err.contains("is NaN") && err.contains("finite weights"), "{err}");
    assert!(!err.contains("not a valid safetensors file"), "the file is well formed: {err}");
}

#[test]
fn training_steps_fit_a_deterministic_next_token_rule() {
    // Labels follow `next = (input * 3 + 1) % vocab`; the context is noise. A few AdamW steps on
    // the tied head must lower the loss well below chance (ln 40 ≈ 3.7).
    let dev = Default::default();
    let (vocab, hidden, rows) = (40usize, 8usize, 64usize);
    let cfg = ReDrafterConfig::for_target(vocab, hidden, HeadKind::Full);
    let mut d = cfg.init::<AB>(&dev, 1);
    let emb = Tensor::<AB, 2>::from_data(TensorData::new(spread(vocab * hidden, 21), [vocab, hidden]), &dev);
    let projection = VocabProjection::None;
    let mut optim = AdamWConfig::new().with_weight_decay(0.0).init::<AB, draftsmith_heads::redrafter::ReDrafter<AB>>();
    let inputs: Vec<i32> = (0..rows as i32).map(|i| (i * 7) % vocab as i32).collect();
    let labels: Vec<i32> = inputs.iter().map(|&x| (x * 3 + 1) % vocab as i32).collect();
    let batch = TrainBatch {
        hidden: Tensor::<AB, 2>::from_data(TensorData::new(spread(rows * hidden, 22), [rows, hidden]), &dev),
        inputs: vec![Tensor::from_data(TensorData::new(inputs, [rows]), &dev)],
        labels: vec![Tensor::from_data(TensorData::new(labels, [rows]), &dev)],
        weights: vec![Tensor::ones([rows], &dev)],
        in_vocab: vec![Tensor::ones([rows], &dev)],
        soft: None,
    };
    let (first, m0) = teacher_forced_loss(&d, &emb, &projection, &batch);
    let first = first.into_scalar();
    assert_eq!(m0[0].count, rows);
    for _ in 0..150 {
        let (loss, _) = teacher_forced_loss(&d, &emb, &projection, &batch);
        let grads = GradientsParams::from_grads(loss.backward(), &d);
        d = optim.step(1e-2, d, grads);
    }
    let (last, m) = teacher_forced_loss(&d, &emb, &projection, &batch);
    let last = last.into_scalar();
    assert!(first > 3.0 && last < 0.5, "loss {first} → {last}");
    assert!(m[0].top1_acc() > 0.9, "top-1 {}", m[0].top1_acc());

    // Labels outside a draft vocabulary (in_vocab 0) add no loss and count as misses.
    let half: Vec<f32> = (0..rows).map(|r| (r % 2) as f32).collect();
    let outside =
        TrainBatch { in_vocab: vec![Tensor::from_data(TensorData::new(half, [rows]), &dev)], ..batch.clone() };
    let (loss_half, mh) = teacher_forced_loss(&d, &emb, &projection, &outside);
    assert_eq!((mh[0].count, mh[0].trained), (rows, rows / 2));
    assert!(mh[0].top1_acc() <= 0.5 && mh[0].top1_acc() > 0.45, "half the rows cannot be hits: {}", mh[0].top1_acc());
    assert!((loss_half.into_scalar() - last).abs() < 0.5, "the mean loss is over the trained rows only");

    // Soft labels: one-hot target distributions at the labels give the labels' loss whatever
    // their weight; uniform ones at full weight give the cross-entropy against uniform.
    let labels_f: Vec<f32> = batch.labels[0]
        .to_data()
        .iter::<i64>()
        .flat_map(|l| (0..vocab as i64).map(move |v| (v == l) as i32 as f32))
        .collect();
    let one_hot = Tensor::<AB, 2>::from_data(TensorData::new(labels_f, [rows, vocab]), &dev);
    for weight in [0.3, 1.0] {
        let soft = TrainBatch { soft: Some(SoftLabels { probs: vec![one_hot.clone()], weight }), ..batch.clone() };
        let (loss, m) = teacher_forced_loss(&d, &emb, &projection, &soft);
        assert!((loss.into_scalar() - last).abs() < 1e-4, "one-hot soft labels at weight {weight}");
        assert_eq!(m[0].top1_acc(), teacher_forced_loss(&d, &emb, &projection, &batch).1[0].top1_acc());
    }
    let uniform = Tensor::<AB, 2>::ones([rows, vocab], &dev) / vocab as f32;
    let soft = TrainBatch { soft: Some(SoftLabels { probs: vec![uniform], weight: 1.0 }), ..batch.clone() };
    let (loss, _) = teacher_forced_loss(&d, &emb, &projection, &soft);
    let logits = d.logits(
        batch.hidden.clone(),
        d.next_state(d.initial_state(rows, hidden, &dev), emb.clone().select(0, batch.inputs[0].clone())),
        &projection,
    );
    let expect = -burn::tensor::activation::log_softmax(logits, 1).mean().into_scalar();
    assert!((loss.into_scalar() - expect).abs() < 1e-4, "uniform soft labels: cross-entropy against uniform");
}
