//! The export stage: a training run's drafter written for use elsewhere, after checking that it
//! loads. `draftsmith` keeps the compact layout the decoders read (tied head, draft vocabulary);
//! `reference` writes a ReDrafter as apple/ml-recurrent-drafter and TensorRT-LLM load it.

use std::path::{Path, PathBuf};

use burn::tensor::{backend::Backend, Tensor};
use draftsmith_core::fsio::write_atomic;
use draftsmith_heads::redrafter::{
    load_redrafter, read_drafter_file, save_reference, weights_path, write_probe, HeadKind, CONFIG_FILE, PROBE_FILE,
    REFERENCE_WEIGHTS_FILE, WEIGHTS_FILE,
};
use draftsmith_heads::tokenswift::load_tokenswift;
use draftsmith_heads::{drafter_kind, DrafterKind, TargetIdentity, WeightDtype};

use crate::checkpoint::checkpoint_dir;
use crate::error::TrainError;

/// The layout an export is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// `drafter.safetensors` + `config.json` as draftsmith writes and reads them (f32).
    #[default]
    Draftsmith,
    /// `model.safetensors` + `config.json` in apple/ml-recurrent-drafter's layout (ReDrafter only).
    Reference,
}

draftsmith_core::value_names!(ExportFormat, "export format", { Draftsmith => "draftsmith", Reference => "reference" });

/// Input rows of a probe.
const PROBE_ROWS: usize = 4;

/// The drafter a training run holds: its final export once training finished, else its last
/// checkpoint (checked against its `state.json` first).
pub fn run_drafter(run: &Path) -> Result<PathBuf, TrainError> {
    let checkpoint = checkpoint_dir(run);
    if run.join(WEIGHTS_FILE).exists() {
        Ok(run.to_path_buf())
    } else if checkpoint.join(WEIGHTS_FILE).exists() {
        crate::checkpoint::verify_checkpoint(run)?;
        Ok(checkpoint)
    } else if !run.is_dir() {
        let what = if run.exists() { "is not a directory" } else { "does not exist" };
        Err(TrainError::Dir { path: run.to_path_buf(), problem: format!("{what} (give a training run's directory)") })
    } else {
        Err(TrainError::Dir {
            path: run.to_path_buf(),
            problem: format!(
                "no exported drafter ({WEIGHTS_FILE}) and no checkpoint with one ({}) (has `draftsmith train` finished a checkpoint here?)",
                checkpoint.join(WEIGHTS_FILE).display()
            ),
        })
    }
}

/// Whether exporting the drafter in `source` as `format` needs the target model: a reference
/// export of a tied head materializes the output layer from the target's LM head.
pub fn export_needs_target(source: &Path, format: ExportFormat) -> Result<bool, TrainError> {
    Ok(format == ExportFormat::Reference
        && drafter_kind(source)? == DrafterKind::ReDrafter
        && read_drafter_file(source)?.head == HeadKind::Tied)
}

/// How to export.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// Weight dtype (`reference` only; the draftsmith layout is f32).
    pub dtype: WeightDtype,
    /// Also write `probe.safetensors` (`reference` only): inputs and the logits draftsmith computes
    /// for them, for checking the export in another runtime.
    pub probe: bool,
}

/// The target an export is checked against, and its LM head for a reference export.
pub struct ExportTarget<B: Backend> {
    pub identity: TargetIdentity,
    /// The LM head as `[vocab, hidden]` rows (`Model::lm_head_matrix` transposed).
    pub lm_head: Tensor<B, 2>,
}

/// What was exported.
#[derive(Debug, Clone)]
pub struct Exported {
    pub kind: DrafterKind,
    pub format: ExportFormat,
    pub files: Vec<PathBuf>,
    /// The target the drafter was trained for, when it says.
    pub target: Option<TargetIdentity>,
    /// One line: the drafter's shape.
    pub description: String,
}

/// Writes the drafter in `source` (see [`run_drafter`]) to `out` in `format`. With `target`, a
/// drafter trained for another target is refused. Options that do not go together, or a format
/// this kind of drafter cannot be written in, are refused as options
/// ([`TrainError::ExportOptions`]: the command line's fault, not the drafter's files'); files
/// already in `out` are replaced only once the new ones are whole.
pub fn export_drafter<B: Backend>(
    source: &Path,
    out: &Path,
    options: ExportOptions,
    target: Option<&ExportTarget<B>>,
    device: &B::Device,
) -> Result<Exported, TrainError> {
    let ExportOptions { format, dtype, probe } = options;
    let kind = drafter_kind(source)?;
    let identity = target.map(|t| &t.identity);
    no_other_layout(out, format)?;
    not_another_run(source, out)?;
    only_its_kind(source, out, kind, format)?;
    match (kind, format) {
        (DrafterKind::TokenSwift, ExportFormat::Reference) => Err(TrainError::ExportOptions(format!(
            "--format reference: {} holds TokenSwift heads, which have no reference checkpoint layout that another \
             runtime loads; export them with --format draftsmith",
            source.display()
        ))),
        (_, ExportFormat::Draftsmith) if dtype != WeightDtype::F32 => Err(TrainError::ExportOptions(format!(
            "--dtype {dtype} needs --format reference: the draftsmith layout is f32 only"
        ))),
        (_, ExportFormat::Draftsmith) if probe => {
            Err(TrainError::ExportOptions("--probe needs --format reference".into()))
        }
        (DrafterKind::TokenSwift, ExportFormat::Draftsmith) => {
            let (heads, file) = load_tokenswift::<B>(source, identity, device)?;
            let files = copy_files(source, out)?;
            let description = format!("TokenSwift, {} heads", heads.heads.len());
            Ok(Exported { kind, format, files, target: file.target, description })
        }
        (DrafterKind::ReDrafter, ExportFormat::Draftsmith) => {
            let (_, file) = load_redrafter::<B>(source, identity, device)?;
            let files = copy_files(source, out)?;
            let description = format!("ReDrafter, {:?} head, {} ResBlocks", file.head, file.num_draft_layers);
            Ok(Exported { kind, format, files, target: file.target, description })
        }
        (DrafterKind::ReDrafter, ExportFormat::Reference) => {
            let (drafter, file) = load_redrafter::<B>(source, identity, device)?;
            let lm_head = match (file.head, target) {
                (HeadKind::Full, _) => None,
                (HeadKind::Tied, Some(t)) => Some(t.lm_head.clone()),
                (HeadKind::Tied, None) => {
                    return Err(TrainError::ExportOptions(format!(
                        "--format reference needs --model here: {}'s output layer is tied to the target's LM \
                         head, from which the export writes the full layer",
                        source.display()
                    )))
                }
            };
            save_reference(out, &drafter, &file, lm_head.clone(), dtype)?;
            let mut files = vec![out.join(REFERENCE_WEIGHTS_FILE), out.join(CONFIG_FILE)];
            if probe {
                write_probe(out, &drafter, &file, lm_head, PROBE_ROWS, device)?;
                files.push(out.join(PROBE_FILE));
            }
            let description = format!(
                "ReDrafter, full [{} × {}] head ({} from a {:?} head), {} ResBlocks",
                file.vocab_size,
                file.exit_dim,
                dtype.torch_name(),
                file.head,
                file.num_draft_layers
            );
            Ok(Exported { kind, format, files, target: file.target, description })
        }
    }
}

/// Both layouts name their config `config.json`: an export into a directory holding the other
/// layout's weights (a run's own directory, say) would leave those weights beside a config that
/// does not describe them, so it is refused before anything is written.
fn no_other_layout(out: &Path, format: ExportFormat) -> Result<(), TrainError> {
    let other = match format {
        ExportFormat::Draftsmith => REFERENCE_WEIGHTS_FILE,
        ExportFormat::Reference => WEIGHTS_FILE,
    };
    match out.join(other).exists() {
        true => Err(TrainError::Dir {
            path: out.to_path_buf(),
            problem: format!(
                "holds {other}, a drafter in the other layout, whose {CONFIG_FILE} a {format} export would replace; \
                 choose another --out"
            ),
        }),
        false => Ok(()),
    }
}

/// A training run's directory (it has a checkpoint) holds that run's drafter: an export of
/// another drafter into it would replace it. The run's own directory is fine (its own weights).
fn not_another_run(source: &Path, out: &Path) -> Result<(), TrainError> {
    let checkpoint = crate::checkpoint::checkpoint_dir(out);
    match checkpoint.is_dir() && !same_dir(source, out) && !same_dir(source, &checkpoint) {
        true => Err(TrainError::Dir {
            path: out.to_path_buf(),
            problem: format!(
                "is another training run (it has a checkpoint), whose drafter an export of {} would replace; \
                 choose another --out",
                source.display()
            ),
        }),
        false => Ok(()),
    }
}

/// Whether files `a` and `b` hold the same bytes (false when either cannot be read).
fn same_bytes(a: &Path, b: &Path) -> bool {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    size(a).is_some() && size(a) == size(b) && std::fs::read(a).ok().is_some_and(|x| std::fs::read(b).ok() == Some(x))
}

/// Whether `a` and `b` name the same existing directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a))
}

/// An export replaces `out/config.json` (and its weights): refused, before anything is written,
/// when that config is not a config of a drafter of this `kind` (a model directory's, another
/// kind of drafter's, anything else), or when a draftsmith export would replace a
/// `drafter.safetensors` that has no config beside it and is not `source`'s own weights (someone's
/// file; an export stopped between its two files leaves exactly `source`'s, and is redone) —
/// re-exporting into an export of the same kind replaces it, as asked.
fn only_its_kind(source: &Path, out: &Path, kind: DrafterKind, format: ExportFormat) -> Result<(), TrainError> {
    let config = out.join(CONFIG_FILE);
    if !config.exists() {
        let lone = out.join(WEIGHTS_FILE);
        if format == ExportFormat::Draftsmith
            && lone.exists()
            && !same_dir(source, out)
            && !same_bytes(&lone, &weights_path(source))
        {
            return Err(TrainError::Dir {
                path: out.to_path_buf(),
                problem: format!(
                    "holds {WEIGHTS_FILE} with no {CONFIG_FILE} beside it, not a drafter export that a {kind} export \
                     would update; choose another --out"
                ),
            });
        }
        return Ok(());
    }
    let what = match drafter_kind(out) {
        Ok(theirs) if theirs == kind => return Ok(()),
        Ok(theirs) => format!("a {theirs} drafter's {CONFIG_FILE}"),
        Err(_) => format!("a {CONFIG_FILE} that is not a drafter's (a model's, or another tool's?)"),
    };
    Err(TrainError::Dir {
        path: out.to_path_buf(),
        problem: format!("holds {what}, which a {kind} export would replace; choose another --out"),
    })
}

/// Copies the weights and config of `source` into `out`, each whole or not at all.
fn copy_files(source: &Path, out: &Path) -> Result<Vec<PathBuf>, TrainError> {
    draftsmith_core::fsio::create_dir(out).map_err(TrainError::io(out))?;
    let mut files = Vec::new();
    for (from, name) in [(weights_path(source), WEIGHTS_FILE), (source.join(CONFIG_FILE), CONFIG_FILE)] {
        let to = out.join(name);
        let bytes = std::fs::read(&from).map_err(TrainError::io(&from))?;
        write_atomic(&to, &bytes).map_err(|(at, source)| TrainError::Io { path: at, source })?;
        files.push(to);
    }
    Ok(files)
}
