//! Transparent huge pages for the whole process, asked for before anything is allocated.
//!
//! A decoding step on the CPU streams every weight of the model (96 MB for SmolLM2-135M Q4_1)
//! and the KV cache; in 4 KiB pages that is some 25 000 pages a step, far more than the TLB
//! holds. Linux backs anonymous memory with 2 MiB pages where the process asks
//! (`madvise(MADV_HUGEPAGE)`: the `[madvise]` mode of
//! `/sys/kernel/mm/transparent_hugepage/enabled`, the default of most distributions) or
//! everywhere (`[always]`). glibc 2.35 and later ask for their heap and large allocations when
//! `GLIBC_TUNABLES` holds `glibc.malloc.hugetlb=1`, a setting read once, when the process
//! starts; so under `[madvise]` the binary re-executes itself once with it added. Measured on
//! a 2-core AMD EPYC (Zen 4, `eval/results/session36-zen4-avx512/huge-pages/`), alternating on
//! and off: `bench ar`'s passes after 64 cached tokens 9 % (one token) and 12 % (eight) faster
//! and its decoding 11 % (six pairs); `generate` 3 % and an `eval` of 20 MT-Bench prompts no
//! faster beyond the host's noise (three and five pairs); the same resident memory.
//!
//! `DRAFTSMITH_HUGEPAGES=0` keeps 4 KiB pages; a `GLIBC_TUNABLES` that already names the
//! setting is left as it is; other C libraries ignore the variable.

/// Re-executes this binary with [`MALLOC_HUGE_PAGES`](draftsmith_kernels::probe::MALLOC_HUGE_PAGES)
/// added to `GLIBC_TUNABLES` when Linux would honour it and nobody said otherwise; returns (and
/// the process goes on with 4 KiB pages) when it need not or cannot.
pub fn ask_before_start() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;

        use draftsmith_kernels::probe::{thp_mode, MALLOC_HUGE_PAGES, MALLOC_HUGE_PAGES_KEY};
        if setting() == Ok(false) {
            return;
        }
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if tunables.split(':').any(|kv| kv.split('=').next() == Some(MALLOC_HUGE_PAGES_KEY)) {
            return;
        }
        if thp_mode() != "madvise" {
            return;
        }
        let Ok(exe) = std::env::current_exe() else { return };
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
        let value = match tunables.as_str() {
            "" => MALLOC_HUGE_PAGES.to_string(),
            t => format!("{t}:{MALLOC_HUGE_PAGES}"),
        };
        // `exec` returns only when it failed; then this process simply goes on.
        let err = std::process::Command::new(exe).arg0(arg0).args(args).env("GLIBC_TUNABLES", value).exec();
        eprintln!("warning: could not restart with huge pages ({err}); going on with 4 KiB pages");
    }
}

/// `DRAFTSMITH_HUGEPAGES` as set: `1` (or unset) asks for huge pages, `0` keeps 4 KiB pages; any
/// other value is refused, naming it.
pub fn setting() -> Result<bool, String> {
    match std::env::var_os("DRAFTSMITH_HUGEPAGES") {
        None => Ok(true),
        Some(v) if v == "1" => Ok(true),
        Some(v) if v == "0" => Ok(false),
        Some(v) => Err(format!(
            "DRAFTSMITH_HUGEPAGES={}: expected 0 (keep 4 KiB pages) or 1 (ask for huge pages, the default)",
            v.to_string_lossy()
        )),
    }
}
