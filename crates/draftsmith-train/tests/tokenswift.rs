//! TokenSwift training on a tiny random target: the heads learn to read a cyclic text several
//! tokens ahead from the target's hidden states, a run killed after a checkpoint resumes to exactly the weights of an
//! uninterrupted run, and bad settings are refused.

use burn::backend::{Autodiff, Flex};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::{build_model, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig};
use draftsmith_train::{chunks, train_tokenswift, TokenSwiftTrainConfig, TrainError, TrainEvent};

type B = Flex;
type AB = Autodiff<Flex>;

fn tiny() -> Model<B> {
    let config = ModelConfig::tiny(Architecture::Qwen2);
    build_model::<B>(
        &config,
        &MemorySource::random(&config, 9),
        LoadOptions::new(MatmulWeights::Quantized),
        &Default::default(),
    )
    .unwrap()
}

/// Streams that cycle through a fixed 12-token phrase, from different starting points: the
/// token 2–4 positions ahead is a function of the current one, which the target's hidden state
/// carries, so the heads can learn it exactly.
fn cyclic_streams(n: usize, len: usize) -> Vec<Vec<u32>> {
    let phrase: Vec<u32> = (0..12).map(|i| (i * 7 + 3) % 48).collect();
    (0..n).map(|s| (0..len).map(|t| phrase[(s + t) % phrase.len()]).collect()).collect()
}

fn identity() -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "11".repeat(32), vocab_size: 48, hidden_size: 32 }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-train-ts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cfg() -> TokenSwiftTrainConfig {
    TokenSwiftTrainConfig {
        seq_len: 24,
        batch_size: 4,
        steps: 60,
        warmup_steps: 5,
        lr: 1e-2,
        checkpoint_every: 20,
        log_every: 10,
        val_chunks: 6,
        ..Default::default()
    }
}

#[test]
fn the_heads_learn_to_read_ahead() {
    let model = tiny();
    let data = chunks(&cyclic_streams(30, 24), 24);
    let (val, train) = data.split_at(6);
    let dir = tmp("learn");
    let mut first_val = None;
    let summary =
        train_tokenswift::<AB>(&model, &identity(), train, val, &cfg(), &dir, serde_json::json!("t"), &mut |e| {
            if let TrainEvent::Validation { heads, .. } = &e {
                first_val.get_or_insert(heads[0].top1_acc());
            }
        })
        .unwrap();
    assert_eq!(summary.val_top1.len(), 3, "three heads");
    let first = first_val.expect("validated at step 20");
    assert!(
        summary.val_top1[0] > 0.5 && summary.val_top1[0] > first + 0.2,
        "validation top-1 of head 1 (token t+2): {first} at step 20, {:?} at the end",
        summary.val_top1
    );
    assert!(dir.join("drafter.safetensors").exists() && dir.join("config.json").exists());
    assert_eq!(draftsmith_heads::drafter_kind(&dir).unwrap(), draftsmith_heads::DrafterKind::TokenSwift);
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.starts_with("60,0,train,")).count(), 3, "one row per head at the last step");
}

#[test]
fn a_killed_run_resumes_to_the_same_weights_and_bad_settings_are_refused() {
    let model = tiny();
    let data = chunks(&cyclic_streams(10, 24), 24);
    let cfg = TokenSwiftTrainConfig { steps: 40, ..cfg() };
    let whole = tmp("whole");
    train_tokenswift::<AB>(
        &model,
        &identity(),
        &data[2..],
        &data[..2],
        &cfg,
        &whole,
        serde_json::json!("d"),
        &mut |_| {},
    )
    .unwrap();
    let killed = tmp("killed");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train_tokenswift::<AB>(
            &model,
            &identity(),
            &data[2..],
            &data[..2],
            &cfg,
            &killed,
            serde_json::json!("d"),
            &mut |e| {
                if let TrainEvent::Checkpoint { step: 20 } = e {
                    panic!("simulated kill");
                }
            },
        )
    }));
    assert!(result.is_err());
    let mut resumed_at = None;
    train_tokenswift::<AB>(
        &model,
        &identity(),
        &data[2..],
        &data[..2],
        &cfg,
        &killed,
        serde_json::json!("d"),
        &mut |e| {
            if let TrainEvent::Start { resumed_at: r, .. } = e {
                resumed_at = Some(r);
            }
        },
    )
    .unwrap();
    assert_eq!(resumed_at, Some(20));
    assert_eq!(
        std::fs::read(whole.join("drafter.safetensors")).unwrap(),
        std::fs::read(killed.join("drafter.safetensors")).unwrap()
    );

    let changed = TokenSwiftTrainConfig { lr: 1e-3, ..cfg.clone() };
    let err = train_tokenswift::<AB>(
        &model,
        &identity(),
        &data[2..],
        &data[..2],
        &changed,
        &killed,
        serde_json::json!("d"),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, TrainError::ResumeMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&format!("train.lr: {} vs 0.001", cfg.lr)), "{err}");
    let short = TokenSwiftTrainConfig { seq_len: 4, ..cfg.clone() };
    assert!(train_tokenswift::<AB>(
        &model,
        &identity(),
        &data,
        &[],
        &short,
        &tmp("short"),
        serde_json::json!("d"),
        &mut |_| {}
    )
    .unwrap_err()
    .to_string()
    .contains("too short"));
    assert!(matches!(
        train_tokenswift::<AB>(&model, &identity(), &[], &[], &cfg, &tmp("empty"), serde_json::json!("d"), &mut |_| {}),
        Err(TrainError::NoExamples(_))
    ));

    // A directory holding heads but no checkpoint (an exported copy) is not trained over.
    let exported = tmp("exported");
    std::fs::create_dir_all(&exported).unwrap();
    for file in ["drafter.safetensors", "config.json"] {
        std::fs::copy(whole.join(file), exported.join(file)).unwrap();
    }
    let err = train_tokenswift::<AB>(
        &model,
        &identity(),
        &data[2..],
        &data[..2],
        &cfg,
        &exported,
        serde_json::json!("d"),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("but no training checkpoint") && err.to_string().contains("drafter.safetensors"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(exported.join("drafter.safetensors")).unwrap(),
        std::fs::read(whole.join("drafter.safetensors")).unwrap()
    );
}

#[test]
fn a_learning_rate_or_weight_decay_that_is_not_a_number_is_refused() {
    let ok = TokenSwiftTrainConfig::default();
    assert!(ok.validate().is_ok());
    for (bad, named) in [
        (TokenSwiftTrainConfig { lr: f64::NAN, ..ok.clone() }, "lr = NaN"),
        (TokenSwiftTrainConfig { max_grad_norm: f64::NAN, ..ok.clone() }, "max_grad_norm = NaN"),
        (TokenSwiftTrainConfig { weight_decay: -5.0, ..ok.clone() }, "weight_decay = -5"),
        (TokenSwiftTrainConfig { batch_size: 0, ..ok.clone() }, "batch_size = 0"),
        (TokenSwiftTrainConfig { steps: 10, ..ok.clone() }, "warmup_steps 50 is not below steps 10"),
    ] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains(named), "{named}: {err}");
    }
}
