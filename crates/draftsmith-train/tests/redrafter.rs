//! ReDrafter training on a tiny random target: it learns the target's own continuations, a run
//! killed after a checkpoint resumes to exactly the weights of an uninterrupted run, and a
//! changed config refuses to resume, and cached hidden states (`draftsmith hidden`) train the
//! same drafter as online mode.

use burn::backend::{Autodiff, Flex};
use draftsmith_data::hidden::Kept;
use draftsmith_data::TargetId;
use draftsmith_heads::redrafter::HeadKind;
use draftsmith_heads::TargetIdentity;
use draftsmith_model::{
    build_model, Architecture, AttentionMask, LoadOptions, LogitsSelect, MatmulWeights, MemorySource, Model,
    ModelConfig,
};
use draftsmith_train::{
    cache_bytes, open_cached, train_redrafter, write_hidden, DistilledSequences, HiddenEvent, LabelSource,
    ReDrafterTrainConfig, Sequence, TrainError, TrainEvent,
};

type B = Flex;
type AB = Autodiff<Flex>;

fn tiny() -> Model<B> {
    let config = ModelConfig::tiny(Architecture::Llama);
    build_model::<B>(
        &config,
        &MemorySource::random(&config, 7),
        LoadOptions::new(MatmulWeights::Quantized),
        &Default::default(),
    )
    .unwrap()
}

/// Prompt of 4 pseudo-random tokens followed by 24 greedy tokens of the target.
fn self_distilled(model: &Model<B>, n: usize) -> Vec<Sequence> {
    let mut state = 12345u64;
    (0..n)
        .map(|_| {
            let mut tokens: Vec<u32> = (0..4)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((state >> 33) % 48) as u32
                })
                .collect();
            let mut cache = model.new_cache(64);
            let mut pos = 0;
            let mut feed = tokens.clone();
            for _ in 0..24 {
                let positions: Vec<usize> = (pos..pos + feed.len()).collect();
                let out =
                    model.forward(&feed, &positions, &AttentionMask::Causal, LogitsSelect::Last, &mut cache).unwrap();
                pos += feed.len();
                let row: Vec<f32> = out.logits.into_data().to_vec().unwrap();
                let next = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as u32;
                tokens.push(next);
                feed = vec![next];
            }
            let loss_mask = (0..tokens.len()).map(|i| i >= 4).collect();
            Sequence { tokens, loss_mask, teacher: None, teacher_len: 0 }
        })
        .collect()
}

fn identity() -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "00".repeat(32), vocab_size: 48, hidden_size: 32 }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-train-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cfg() -> ReDrafterTrainConfig {
    ReDrafterTrainConfig {
        horizon: 3,
        epochs: 30,
        batch_size: 64,
        lr: 3e-3,
        checkpoint_every: 20,
        log_every: 10,
        val_fraction: 0.1,
        ..Default::default()
    }
}

#[test]
fn learns_the_targets_continuations() {
    let model = tiny();
    let seqs = self_distilled(&model, 40);
    let dir = tmp("learn");
    let summary =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg(), &dir, serde_json::json!("t"), None, &mut |_| {})
            .unwrap();
    assert!(summary.val_top1[0] > 0.6, "validation top-1 of head 1: {:?}", summary.val_top1);
    assert!(dir.join("drafter.safetensors").exists() && dir.join("config.json").exists());
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert!(csv.lines().any(|l| l.contains(",val,")), "validation rows logged");
}

#[test]
fn soft_labels_learn_the_targets_continuations_and_need_ground_truth_labels() {
    let model = tiny();
    let seqs = self_distilled(&model, 40);
    // Half the loss from the target's own distributions, on a draft vocabulary (the teacher's
    // LM head is cut to it) and on the whole one.
    for draft_vocab in [12, 0] {
        let dir = tmp(&format!("soft-{draft_vocab}"));
        let soft = ReDrafterTrainConfig { soft_labels: 0.5, draft_vocab, ..cfg() };
        let summary =
            train_redrafter::<AB>(&model, &identity(), &seqs, &soft, &dir, serde_json::json!("t"), None, &mut |_| {})
                .unwrap();
        assert!(summary.val_top1[0] > 0.6, "validation top-1 of head 1: {:?}", summary.val_top1);
    }
    // A setting left at 0 stays out of the run's fingerprint (runs from before it resume).
    assert!(serde_json::to_value(cfg()).unwrap().get("soft_labels").is_none());
    for bad in [
        ReDrafterTrainConfig { soft_labels: 1.5, ..cfg() },
        ReDrafterTrainConfig { soft_labels: 0.5, labels: LabelSource::Teacher, ..cfg() },
    ] {
        let err = train_redrafter::<AB>(
            &model,
            &identity(),
            &seqs,
            &bad,
            &tmp("soft-bad"),
            serde_json::json!("t"),
            None,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("soft_labels"), "{err}");
    }
}

#[test]
fn a_draft_vocabulary_keeps_the_most_frequent_labels() {
    let model = tiny();
    let seqs = self_distilled(&model, 40);
    let dir = tmp("draft-vocab");
    let small = ReDrafterTrainConfig { draft_vocab: 6, ..cfg() };
    let summary =
        train_redrafter::<AB>(&model, &identity(), &seqs, &small, &dir, serde_json::json!("t"), None, &mut |_| {})
            .unwrap();
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let ids: Vec<u32> = serde_json::from_value(file["draft_vocab"].clone()).unwrap();
    assert!(ids.len() == 6 && ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // Response tokens by frequency: the six most frequent must be the draft vocabulary (labels
    // are response tokens; a token's label count is its response count up to the edges).
    let mut counts = [0usize; 48];
    seqs.iter().for_each(|s| {
        s.tokens.iter().zip(&s.loss_mask).filter(|(_, &m)| m).for_each(|(&t, _)| counts[t as usize] += 1)
    });
    let top = *counts.iter().max().unwrap();
    assert!(
        ids.contains(&(counts.iter().position(|&c| c == top).unwrap() as u32)),
        "the most frequent label is kept: {ids:?} {counts:?}"
    );
    let coverage = file["training"]["draft_vocab_label_coverage"].as_f64().unwrap();
    assert!(coverage > 0.3 && coverage < 1.0, "six of the labels' tokens cover part of them: {coverage}");
    assert!(summary.val_top1[0] > 0.3, "still learns: {:?}", summary.val_top1);
    // The full head ignores the setting.
    let full = ReDrafterTrainConfig { head: HeadKind::Full, draft_vocab: 6, epochs: 1, ..cfg() };
    let dir_full = tmp("draft-vocab-full");
    train_redrafter::<AB>(&model, &identity(), &seqs, &full, &dir_full, serde_json::json!("t"), None, &mut |_| {})
        .unwrap();
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir_full.join("config.json")).unwrap()).unwrap();
    assert!(file.get("draft_vocab").is_none());
}

#[test]
fn a_killed_run_resumes_to_the_same_weights() {
    let model = tiny();
    let seqs = self_distilled(&model, 12);
    let cfg = ReDrafterTrainConfig { epochs: 8, head: HeadKind::Full, labels: LabelSource::GroundTruth, ..cfg() };
    let whole = tmp("whole");
    train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &whole, serde_json::json!("d"), None, &mut |_| {}).unwrap();

    let killed = tmp("killed");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &killed, serde_json::json!("d"), None, &mut |e| {
            if let TrainEvent::Checkpoint { step: 20 } = e {
                panic!("simulated kill");
            }
        })
    }));
    assert!(result.is_err());
    assert!(!killed.join("drafter.safetensors").exists());
    let mut resumed_at = None;
    train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &killed, serde_json::json!("d"), None, &mut |e| {
        if let TrainEvent::Start { resumed_at: r, .. } = e {
            resumed_at = Some(r);
        }
    })
    .unwrap();
    assert_eq!(resumed_at, Some(20));
    assert_eq!(
        std::fs::read(whole.join("drafter.safetensors")).unwrap(),
        std::fs::read(killed.join("drafter.safetensors")).unwrap()
    );

    let changed = ReDrafterTrainConfig { lr: 1e-2, ..cfg };
    let err =
        train_redrafter::<AB>(&model, &identity(), &seqs, &changed, &killed, serde_json::json!("d"), None, &mut |_| {})
            .unwrap_err();
    assert!(matches!(err, TrainError::ResumeMismatch { .. }), "{err}");
    // Named, with both values (the checkpoint's first), and before any hidden state is computed.
    let text = err.to_string();
    assert!(text.contains(&format!("train.lr: {} vs 0.01", cfg.lr)), "{text}");
    let mut computed = false;
    let _ =
        train_redrafter::<AB>(&model, &identity(), &seqs, &changed, &killed, serde_json::json!("d"), None, &mut |e| {
            computed |= matches!(e, draftsmith_train::TrainEvent::Hidden { .. })
        });
    assert!(!computed, "refused before the hidden-state pass");

    // A directory holding a drafter but no checkpoint (an exported copy) is not trained over.
    let exported = tmp("exported");
    std::fs::create_dir_all(&exported).unwrap();
    for file in ["drafter.safetensors", "config.json"] {
        std::fs::copy(whole.join(file), exported.join(file)).unwrap();
    }
    let err =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &exported, serde_json::json!("d"), None, &mut |_| {})
            .unwrap_err();
    assert!(err.to_string().contains("holds drafter.safetensors, config.json but no training checkpoint"), "{err}");
    assert_eq!(
        std::fs::read(exported.join("drafter.safetensors")).unwrap(),
        std::fs::read(whole.join("drafter.safetensors")).unwrap()
    );
    // Any file a run writes at its end counts: a user's own config.json is not replaced either.
    std::fs::remove_file(exported.join("drafter.safetensors")).unwrap();
    let err =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &exported, serde_json::json!("d"), None, &mut |_| {})
            .unwrap_err();
    assert!(err.to_string().contains("holds config.json but no training checkpoint"), "{err}");

    // A checkpoint without its state (checkpoints are written whole) is damaged: named, not
    // silently restarted over.
    std::fs::remove_file(whole.join("checkpoint/state.json")).unwrap();
    let err =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &whole, serde_json::json!("d"), None, &mut |_| {})
            .unwrap_err()
            .to_string();
    assert!(err.contains("state.json") && err.contains("missing") && err.contains("restart the run"), "{err}");
    assert!(whole.join("checkpoint/module.mpk").exists(), "kept");
}

#[test]
fn a_run_that_diverges_stops_and_saves_nothing_of_it() {
    let model = tiny();
    let seqs = self_distilled(&model, 12);
    let cfg = ReDrafterTrainConfig { epochs: 8, lr: 1e6, ..cfg() };
    let run = tmp("diverged");
    let mut checkpoints = 0;
    let err = train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &run, serde_json::json!("d"), None, &mut |e| {
        checkpoints += matches!(e, TrainEvent::Checkpoint { .. }) as usize
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("training diverged at step") && err.contains("lower --lr"), "{err}");
    assert!(!run.join("drafter.safetensors").exists() || checkpoints > 0, "no drafter of a diverged state: {err}");
    if run.join("drafter.safetensors").exists() {
        // What a checkpoint saved before the divergence loads (finite weights).
        draftsmith_heads::redrafter::load_redrafter::<B>(&run, None, &Default::default()).unwrap();
    }
}

#[test]
fn a_damaged_checkpoint_record_is_named_with_what_to_do() {
    let model = tiny();
    let seqs = self_distilled(&model, 12);
    let cfg = ReDrafterTrainConfig { epochs: 8, head: HeadKind::Full, labels: LabelSource::GroundTruth, ..cfg() };
    let run = tmp("damaged");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &run, serde_json::json!("d"), None, &mut |e| {
            if let TrainEvent::Checkpoint { step: 20 } = e {
                panic!("simulated kill");
            }
        })
    }));
    assert!(result.is_err());
    let record = std::fs::read_dir(run.join("checkpoint"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("module")))
        .expect("a module record");
    let bytes = std::fs::read(&record).unwrap();
    std::fs::write(&record, &bytes[..bytes.len() / 2]).unwrap();
    let resume = || {
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &run, serde_json::json!("d"), None, &mut |_| {})
            .unwrap_err()
            .to_string()
    };
    // The checkpoint's state lists each file's sha256: a changed record is named before burn reads it.
    let err = resume();
    assert!(err.contains("module.mpk") && err.contains("sha256") && err.contains("changed or damaged"), "{err}");
    // A checkpoint written before the checksums: burn's decoder names the damage.
    let state_path = run.join("checkpoint/state.json");
    let mut state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    assert!(state.as_object_mut().unwrap().remove("files").is_some());
    std::fs::write(&state_path, state.to_string()).unwrap();
    let err = resume();
    assert!(err.contains("module.mpk") && err.contains("truncated or damaged"), "{err}");
    assert!(!err.contains("record-backward-compat"), "burn's advice for 0.14 records is left out: {err}");
}

/// The engine label the tests' caches are computed with.
const ENGINE: &str = "cpu/quantized/int8";

#[test]
fn cached_hidden_states_train_the_same_drafter_and_resume_an_online_run() {
    let model = tiny();
    let seqs = self_distilled(&model, 12);
    let fingerprint = |shard: &str, limit: Option<usize>| serde_json::json!({ "shards": [shard], "params": {}, "limit": limit, "max_seq_len": 64 });
    let data =
        DistilledSequences { sequences: seqs.clone(), fingerprint: fingerprint("s0", None), shard_sequences: vec![12] };
    let cache = tmp("hidden-cache");
    let target = TargetId { name: "tiny".into(), sha256: identity().sha256 };
    let mut last = (0, 0);
    let manifest = write_hidden(&model, &target, ENGINE, &data, &cache, 5, &mut |e| {
        if let HiddenEvent::Progress { done, total } = e {
            last = (done, total)
        }
    })
    .unwrap();
    assert!(manifest.complete && manifest.shards.len() == 3, "{manifest:?}");
    assert_eq!(last, (data.tokens(), data.tokens()));
    assert_eq!(cache_bytes(&data, 32), manifest.bytes());

    let cfg = ReDrafterTrainConfig { epochs: 8, head: HeadKind::Full, ..cfg() };
    let online = tmp("hidden-online");
    let summary =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &online, serde_json::json!("d"), None, &mut |_| {})
            .unwrap();
    assert_eq!(summary.hidden_source.as_deref(), Some("online"));
    assert_eq!(summary.epoch_seconds.len(), 8, "one time per epoch");
    let open = || Some(open_cached(&cache, &identity().sha256, ENGINE, &data).unwrap());
    let cached = tmp("hidden-cached");
    let mut hidden_events = 0;
    let summary =
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &cached, serde_json::json!("d"), open(), &mut |e| {
            hidden_events += matches!(e, TrainEvent::Hidden { .. }) as usize
        })
        .unwrap();
    assert_eq!(hidden_events, 0, "no target pass");
    assert!(summary.hidden_source.unwrap().contains("hidden-cache"));
    let weights = |dir: &std::path::Path| std::fs::read(dir.join("drafter.safetensors")).unwrap();
    assert_eq!(weights(&online), weights(&cached), "the same drafter from the cache as online");

    // A run started online and killed resumes from the cache to the same weights.
    let killed = tmp("hidden-killed");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &killed, serde_json::json!("d"), None, &mut |e| {
            if let TrainEvent::Checkpoint { step: 20 } = e {
                panic!("simulated kill");
            }
        })
    }));
    assert!(result.is_err());
    train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &killed, serde_json::json!("d"), open(), &mut |_| {})
        .unwrap();
    assert_eq!(weights(&online), weights(&killed));

    // The first sequences of the dataset (a --limit) are served by the whole dataset's cache;
    // another target or another dataset is refused, naming the manifest.
    let first = DistilledSequences {
        sequences: seqs[..4].to_vec(),
        fingerprint: fingerprint("s0", Some(4)),
        shard_sequences: vec![12],
    };
    assert!(open_cached(&cache, &identity().sha256, ENGINE, &first).is_ok());
    // `hidden --limit 4` over that cache: nothing to compute, nothing changed.
    let mut opened = None;
    let manifest_before = std::fs::read(cache.join("hidden-manifest.json")).unwrap();
    write_hidden(&model, &target, ENGINE, &first, &cache, 5, &mut |e| {
        if let HiddenEvent::Opened { done, total, .. } = e {
            opened = Some((done, total));
        }
    })
    .unwrap();
    assert_eq!(opened, Some((first.tokens(), first.tokens())));
    assert_eq!(std::fs::read(cache.join("hidden-manifest.json")).unwrap(), manifest_before);
    {
        // While `draftsmith hidden` still writes it, the cache is refused as being written.
        let _writing = draftsmith_core::fsio::DirLock::acquire(&cache, "hidden").unwrap();
        let err = open_cached(&cache, &identity().sha256, ENGINE, &data).err().unwrap().to_string();
        assert!(err.contains(&cache.display().to_string()) && err.contains("still being written"), "{err}");
    }
    // Hidden states of another engine (activation mode) are refused, and `hidden` does not
    // resume the cache with them.
    let err = open_cached(&cache, &identity().sha256, "cpu/quantized/f32", &data).err().unwrap().to_string();
    assert!(err.contains("`cpu/quantized/int8` engine") && err.contains("cpu/quantized/f32"), "{err}");
    let err = write_hidden(&model, &target, "cpu/quantized/f32", &data, &cache, 5, &mut |_| {}).err().unwrap();
    assert!(err.to_string().contains("cpu/quantized/f32"), "{err}");
    // A cache written before the engine was recorded is read by any.
    let manifest_path = cache.join("hidden-manifest.json");
    let recorded = std::fs::read(&manifest_path).unwrap();
    let mut old: serde_json::Value = serde_json::from_slice(&recorded).unwrap();
    old["dataset"].as_object_mut().unwrap().remove("engine");
    std::fs::write(&manifest_path, old.to_string()).unwrap();
    assert!(open_cached(&cache, &identity().sha256, "cpu/quantized/f32", &data).is_ok());
    std::fs::write(&manifest_path, recorded).unwrap();
    let err = open_cached(&cache, &"ff".repeat(32), ENGINE, &data).err().unwrap().to_string();
    assert!(err.contains("hidden-manifest.json") && err.contains("not with the target being trained for"), "{err}");
    let other =
        DistilledSequences { sequences: seqs.clone(), fingerprint: fingerprint("s1", None), shard_sequences: vec![12] };
    let err = open_cached(&cache, &identity().sha256, ENGINE, &other).err().unwrap().to_string();
    assert!(err.contains("hidden-manifest.json") && err.contains("another dataset") && err.contains("delete"), "{err}");

    // The dataset grown by a later distill: the trainer asks for `hidden`, which extends the
    // cache (its 12 sequences kept, 3 computed) to what the trainer then reads.
    let grown = DistilledSequences {
        sequences: seqs.iter().chain(&seqs[..3]).cloned().collect(),
        fingerprint: serde_json::json!({ "shards": ["s0", "s1"], "params": {}, "limit": null, "max_seq_len": 64 }),
        shard_sequences: vec![12, 3],
    };
    let err = open_cached(&cache, &identity().sha256, ENGINE, &grown).err().unwrap().to_string();
    assert!(err.contains("has grown since") && err.contains("to update it"), "{err}");
    let mut events = Vec::new();
    let manifest = write_hidden(&model, &target, ENGINE, &grown, &cache, 5, &mut |e| events.push(e)).unwrap();
    let done: usize = seqs.iter().map(|s| s.tokens.len()).sum();
    let kept = Some(Kept { sequences: 12, of: 12, shards: 1 });
    assert_eq!(events[0], HiddenEvent::Opened { done, total: grown.tokens(), kept });
    assert_eq!(events.len(), 4, "three sequences computed");
    assert!(manifest.complete && manifest.sequences == 15, "{manifest:?}");
    assert!(open_cached(&cache, &identity().sha256, ENGINE, &grown).is_ok());
}

#[test]
fn a_setting_out_of_range_is_refused_naming_it_and_its_value() {
    for (bad, named) in [
        (ReDrafterTrainConfig { lr: f64::NAN, ..cfg() }, "lr = NaN"),
        (ReDrafterTrainConfig { lr: f64::INFINITY, ..cfg() }, "lr = inf"),
        (ReDrafterTrainConfig { lr: 0.0, ..cfg() }, "lr = 0"),
        (ReDrafterTrainConfig { weight_decay: -5.0, ..cfg() }, "weight_decay = -5"),
        (ReDrafterTrainConfig { weight_decay: f64::NAN, ..cfg() }, "weight_decay = NaN"),
        (ReDrafterTrainConfig { batch_size: 0, ..cfg() }, "batch_size = 0"),
        (ReDrafterTrainConfig { max_steps: Some(0), ..cfg() }, "max_steps = 0"),
        (ReDrafterTrainConfig { horizon: 1000, ..cfg() }, "horizon = 1000: at most 32"),
        (ReDrafterTrainConfig { val_fraction: 1.0, ..cfg() }, "val_fraction = 1: must be in [0, 1)"),
        (ReDrafterTrainConfig { warmup_fraction: -0.1, ..cfg() }, "warmup_fraction = -0.1"),
    ] {
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains(named), "{named}: {err}");
    }
    assert!(cfg().validate().is_ok());
}

#[test]
fn teacher_labels_need_a_continuation_longer_than_the_horizon() {
    // A continuation's first token is the target's own: 3 tokens label 2 draft steps.
    let model = tiny();
    let seqs: Vec<Sequence> = self_distilled(&model, 4)
        .into_iter()
        .map(|s| Sequence { teacher: Some(vec![1; s.tokens.len() * 3]), teacher_len: 3, ..s })
        .collect();
    let cfg = ReDrafterTrainConfig { horizon: 3, labels: LabelSource::Teacher, ..cfg() };
    let run = tmp("teacher-horizon");
    let err = train_redrafter::<AB>(&model, &identity(), &seqs, &cfg, &run, serde_json::json!("d"), None, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--horizon 3 with --labels teacher needs continuations of at least 4 tokens")
            && err.contains("--teacher-len 4")
            && err.contains("--horizon 2"),
        "{err}"
    );
    assert!(!run.exists(), "refused before the run's directory is made");
}
