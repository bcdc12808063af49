//! `distill` end to end on the checked-in tiny Llama GGUF (it has a ChatML template).

use std::path::{Path, PathBuf};

use burn::backend::Flex;
use draftsmith_data::{read_records, Conversation, Message, RecordSource, Role, ShardWriter, TargetId};
use draftsmith_distill::{distill, DistillConfig, DistillEvent, SkipReason};
use draftsmith_model::{load_model, LoadOptions, LoadedModel, MatmulWeights};

fn fixture() -> LoadedModel<Flex> {
    let path =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures/tiny-llama.gguf");
    load_model::<Flex>(&path, LoadOptions::new(MatmulWeights::Quantized), &Default::default()).unwrap()
}

fn msg(role: Role, content: &str) -> Message {
    Message { role, content: content.into() }
}

fn conversations() -> Vec<Conversation> {
    let c = |id: &str, messages| Conversation { id: id.into(), messages };
    vec![
        c(
            "a",
            vec![
                msg(Role::User, "the cat"),
                msg(Role::Assistant, "sat on the mat"),
                msg(Role::User, "and then"),
                msg(Role::Assistant, "it slept"),
            ],
        ),
        c("b", vec![msg(Role::System, "be brief"), msg(Role::User, "the dog")]),
        c("c", vec![msg(Role::Assistant, "hello"), msg(Role::User, &"the ".repeat(80))]),
    ]
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-distill-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn run(
    loaded: &LoadedModel<Flex>,
    cfg: &DistillConfig,
    dir: &Path,
    inputs: &[Conversation],
) -> (draftsmith_distill::DistillStats, Vec<DistillEvent>) {
    let target = TargetId { name: "tiny-llama".into(), sha256: "0".repeat(64) };
    let mut writer =
        ShardWriter::open(dir, target, cfg.params(serde_json::json!("test")), cfg.inputs_per_shard).unwrap();
    let mut events = Vec::new();
    let stats = distill(&loaded.model, &loaded.tokenizer, inputs, cfg, &mut writer, &mut |e| events.push(e)).unwrap();
    writer.finish().unwrap();
    (stats, events)
}

#[test]
fn self_distilled_and_ground_truth_records_resume_and_match_generation() {
    let loaded = fixture();
    let cfg = DistillConfig {
        ground_truth: true,
        teacher_len: 3,
        topk: 2,
        max_new_tokens: 6,
        max_prompt_tokens: 60,
        inputs_per_shard: 2,
        ..Default::default()
    };
    let dir = scratch("both");
    let all = conversations();
    let (first, first_events) = run(&loaded, &cfg, &dir, &all[..2]);
    assert_eq!((first.inputs, first.self_distilled, first.ground_truth), (2, 2, 1), "{:?}", first.skipped);
    let answers: Vec<usize> = first_events
        .iter()
        .filter_map(|e| if let DistillEvent::Answer { tokens } = e { Some(*tokens) } else { None })
        .collect();
    assert_eq!(
        (answers.len(), answers.iter().sum::<usize>()),
        (2, first.tokens_generated),
        "one Answer event per generated answer"
    );
    assert_eq!(first.skipped.get(&SkipReason::NoAssistantTurn), Some(&1), "b has no assistant turn");
    let (second, events) = run(&loaded, &cfg, &dir, &all);
    assert_eq!((second.resumed_from, second.inputs), (2, 1), "the finished shard is kept");
    assert_eq!(events[0], DistillEvent::Start { total: 3, done: 2 });
    assert_eq!(second.skipped.get(&SkipReason::PromptTooLong), Some(&1), "c's prompt is over 60 tokens");

    let (manifest, records) = read_records(&dir).unwrap();
    assert!(manifest.complete);
    assert_eq!(manifest.shards.len(), 2);
    let template = loaded.tokenizer.chat_template().unwrap();
    for r in &records {
        let first_trained = r.loss_mask.iter().position(|&m| m).unwrap();
        match r.source {
            RecordSource::SelfDistilled => {
                assert!(r.loss_mask[first_trained..].iter().all(|&m| m), "{}: the response is one trailing span", r.id);
                let prompt = &r.tokens[..first_trained];
                let conv = all.iter().find(|c| c.id == r.id).unwrap();
                let msgs: Vec<_> = conv
                    .messages
                    .iter()
                    .take(2)
                    .filter(|m| m.role != Role::Assistant)
                    .map(|m| {
                        draftsmith_model::ChatMessage::new(
                            if m.role == Role::System { "system" } else { "user" },
                            &m.content,
                        )
                    })
                    .collect();
                assert_eq!(
                    prompt,
                    loaded.tokenizer.encode(&template.render(&msgs, true).unwrap()).unwrap(),
                    "{}",
                    r.id
                );
                let greedy = draftsmith_decode::generate(
                    &loaded.model,
                    prompt,
                    6,
                    loaded.tokenizer.eos_ids(),
                    &mut draftsmith_decode::Sampler::new(Default::default()),
                    &mut |_| true,
                )
                .unwrap();
                assert_eq!(&r.tokens[first_trained..], greedy.tokens.as_slice(), "{}", r.id);
            }
            RecordSource::GroundTruth => {
                let text = loaded
                    .tokenizer
                    .decode(&r.tokens.iter().zip(&r.loss_mask).filter(|(_, &m)| m).map(|(&t, _)| t).collect::<Vec<_>>())
                    .unwrap();
                assert_eq!(r.id, "a", "c opens with the assistant: that turn is dropped, leaving no assistant turn");
                assert_eq!(
                    text, "sat on the mat<|im_end|>\nit slept<|im_end|>\n",
                    "the assistant turns with their end-of-turn markup"
                );
            }
        }
        let t = r.teacher.as_ref().unwrap();
        assert_eq!(t.len(), r.tokens.len() * 3);
        assert_ne!(
            t[(first_trained - 1) * 3],
            draftsmith_data::NO_TOKEN,
            "the position before the first trained token has a continuation"
        );
        assert_eq!(r.teacher_topk_ids.as_ref().unwrap().len(), r.tokens.len() * 2);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn raw_prompts_without_the_template_and_config_checks() {
    let loaded = fixture();
    let cfg = DistillConfig { chat_template: false, max_new_tokens: 3, ..Default::default() };
    let dir = scratch("raw");
    let (stats, _) = run(&loaded, &cfg, &dir, &conversations()[..1]);
    let (_, records) = read_records(&dir).unwrap();
    assert_eq!(stats.records, 1);
    assert_eq!(
        &records[0].tokens[..records[0].tokens.len() - 3],
        loaded.tokenizer.encode("the cat").unwrap().as_slice()
    );

    let bad = DistillConfig { topk: 100_000, ..Default::default() };
    let mut writer = ShardWriter::open(
        &scratch("bad"),
        TargetId { name: "x".into(), sha256: "0".into() },
        bad.params(serde_json::Value::Null),
        1,
    )
    .unwrap();
    let err = distill(&loaded.model, &loaded.tokenizer, &conversations(), &bad, &mut writer, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("topk"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_deleted_shard_is_redone_alone_and_foreign_shards_are_refused() {
    let loaded = fixture();
    let cfg = DistillConfig { topk: 2, max_new_tokens: 3, inputs_per_shard: 1, ..Default::default() };
    let dir = scratch("redo");
    let all = conversations();
    let (first, _) = run(&loaded, &cfg, &dir, &all);
    assert_eq!(first.inputs, 3);
    let (manifest, records) = read_records(&dir).unwrap();
    let shard = |i: usize| dir.join(format!("shard-{i:05}.parquet"));
    let kept = [std::fs::read(shard(0)).unwrap(), std::fs::read(shard(2)).unwrap()];

    // Deleted (as a checksum mismatch's message says to): only its input is distilled again.
    std::fs::remove_file(shard(1)).unwrap();
    let (second, events) = run(&loaded, &cfg, &dir, &all);
    assert_eq!((second.resumed_from, second.inputs), (2, 1), "{second:?}");
    assert_eq!(events[0], DistillEvent::Start { total: 3, done: 2 });
    let indices: Vec<usize> = events
        .iter()
        .filter_map(|e| if let DistillEvent::Input { index, .. } = e { Some(*index) } else { None })
        .collect();
    assert_eq!(indices, [1]);
    assert_eq!(read_records(&dir).unwrap(), (manifest, records), "the same dataset again");
    assert_eq!([std::fs::read(shard(0)).unwrap(), std::fs::read(shard(2)).unwrap()], kept, "the others untouched");

    // Without its manifest, the directory's shards are not this run's to delete.
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    let target = TargetId { name: "tiny-llama".into(), sha256: "0".repeat(64) };
    let Err(err) = ShardWriter::open(&dir, target, cfg.params(serde_json::json!("test")), 1) else { panic!("opened") };
    let text = err.to_string();
    assert!(text.contains("no manifest.json") && text.contains("shard-00000.parquet"), "{text}");
    assert!(shard(0).exists() && shard(1).exists() && shard(2).exists());
    let _ = std::fs::remove_dir_all(&dir);
}
