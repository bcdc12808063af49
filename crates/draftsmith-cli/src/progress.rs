//! Progress display shared by the subcommands: artifact downloads, training runs, and lines for
//! the bars of long stages when stderr is not a terminal.

use std::cell::Cell;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use draftsmith_fetch::{Artifact, FetchEvent};
use draftsmith_train::TrainEvent;
use indicatif::{ProgressBar, ProgressStyle};

/// Fetches an artifact, rendering progress on stderr.
pub fn fetch_with_progress(artifact: &Artifact) -> Result<PathBuf> {
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let name = artifact.name;
    let path =
        draftsmith_fetch::fetch(artifact, &draftsmith_fetch::data_dir(), &mut |event| match event {
            FetchEvent::AlreadyPresent(p) => spinner.set_message(format!("{name}: already present at {}", p.display())),
            FetchEvent::Done(p) => spinner.set_message(format!("{name}: ready at {}", p.display())),
            // Kept on screen: the spinner's line is cleared at the end.
            FetchEvent::Invalid { path, reason } => spinner
                .suspend(|| eprintln!("{name}: {} does not verify ({reason}): building it again", path.display())),
            FetchEvent::Waiting { dir, holder } => spinner
                .suspend(|| eprintln!("{name}: another fetch holds {} ({holder}): waiting for it", dir.display())),
            other => spinner.set_message(format!("{name}: {other:?}")),
        })?;
    spinner.finish_and_clear();
    eprintln!("{name}: {}", path.display());
    Ok(path)
}

/// Lines of a bar's progress where indicatif draws nothing (stderr not a terminal: a batch job, a
/// log file): what is done, the time spent and left and the bar's message, at most every
/// [`OffTerminal::EVERY`] and when the bar reaches its length. Nothing on a terminal.
pub struct OffTerminal {
    what: &'static str,
    on: bool,
    last: Cell<Option<Instant>>,
    /// When the first line was due and the bar's position then (what a resumed run had done).
    first: Cell<Option<(Instant, u64)>>,
}

impl OffTerminal {
    /// The shortest time between two lines.
    pub const EVERY: Duration = Duration::from_secs(30);

    /// `what`: the stage, leading each line (`eval`, `distill`, …).
    pub fn new(what: &'static str) -> Self {
        Self { what, on: !std::io::stderr().is_terminal(), last: Cell::new(None), first: Cell::new(None) }
    }

    /// Logs `bar`'s state when a line is due.
    pub fn tick(&self, bar: &ProgressBar) {
        let (pos, len) = (bar.position(), bar.length().unwrap_or(0));
        if !self.on || len == 0 {
            return;
        }
        let due = self.last.get().is_none_or(|t| t.elapsed() >= Self::EVERY);
        if !(due || pos >= len) {
            return;
        }
        self.last.set(Some(Instant::now()));
        let (since, base) = self.first.get().unwrap_or((Instant::now(), pos));
        self.first.set(Some((since, base)));
        // The rate since the first line, not indicatif's smoothed one: batched stages advance in
        // jumps, and a rate from the first jump alone reads hours for minutes.
        let left = match pos.checked_sub(base) {
            Some(done) if done > 0 && pos < len => {
                format!(", ~{} left", minutes(since.elapsed().mul_f64((len - pos) as f64 / done as f64)))
            }
            _ => String::new(),
        };
        let message = bar.message();
        let message = if message.is_empty() { String::new() } else { format!(" {message}") };
        eprintln!("{}: {pos}/{len} [{} spent{left}]{message}", self.what, minutes(bar.elapsed()));
    }
}

/// `1h02m`, `3m05s` or `12s`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// Renders training progress on stderr: bars on a terminal, [`OffTerminal`] lines otherwise
/// (every 30 s with the time left: at a line per 100 steps, TokenSwift's 200 steps of ~9 s
/// logged nothing for its first quarter of an hour, session 56).
pub struct TrainDisplay {
    hidden_bar: Option<ProgressBar>,
    steps_bar: Option<ProgressBar>,
    hidden_lines: OffTerminal,
    step_lines: OffTerminal,
}

impl TrainDisplay {
    /// `hidden_tokens`: the target tokens whose hidden states are computed before training, if any.
    pub fn new(hidden_tokens: Option<usize>) -> Self {
        let hidden_bar = hidden_tokens.map(|tokens| {
            let bar = ProgressBar::new(tokens as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "target hidden states {bar:30} {pos}/{len} tokens [{elapsed} < {eta}, {per_sec}]",
                )
                .expect("valid template"),
            );
            bar
        });
        Self {
            hidden_bar,
            steps_bar: None,
            hidden_lines: OffTerminal::new("target hidden states"),
            step_lines: OffTerminal::new("train"),
        }
    }

    pub fn on(&mut self, event: TrainEvent) {
        match event {
            TrainEvent::Hidden { done, .. } => {
                if let Some(bar) = &self.hidden_bar {
                    bar.set_position(done as u64);
                    self.hidden_lines.tick(bar);
                }
            }
            TrainEvent::Start { total_steps, resumed_at, examples, val_examples, params } => {
                if let Some(bar) = self.hidden_bar.take() {
                    bar.finish();
                }
                if resumed_at > 0 {
                    eprintln!("resuming at step {resumed_at} of {total_steps}");
                }
                eprintln!(
                    "{examples} training positions, {val_examples} validation positions, {params} trainable parameters"
                );
                let b = ProgressBar::new(total_steps as u64);
                b.set_style(
                    ProgressStyle::with_template("train {bar:30} {pos}/{len} steps [{elapsed} < {eta}] {msg}")
                        .expect("valid template"),
                );
                b.set_position(resumed_at as u64);
                self.steps_bar = Some(b);
            }
            TrainEvent::Step { step, loss, lr, top1, .. } => {
                let acc: Vec<String> = top1.iter().map(|&a| percent(a, 0)).collect();
                let loss = if loss.is_nan() { "n/a".to_string() } else { format!("{loss:.3}") };
                if let Some(b) = &self.steps_bar {
                    b.set_position(step as u64);
                    b.set_message(format!("loss {loss} lr {lr:.1e} top-1 % per head {}", acc.join("/")));
                    self.step_lines.tick(b);
                }
            }
            TrainEvent::Validation { step, heads } => {
                let acc: Vec<String> = heads.iter().map(|m| percent(m.top1_acc(), 1)).collect();
                let line = format!("step {step}: validation top-1 % per head {}", acc.join(" / "));
                // A hidden bar (stderr not a terminal) prints nothing of its own.
                match &self.steps_bar {
                    Some(b) if !b.is_hidden() => b.println(line),
                    _ => eprintln!("{line}"),
                }
            }
            TrainEvent::Checkpoint { .. } => {}
        }
    }

    pub fn finish(self) {
        if let Some(b) = self.steps_bar {
            b.finish();
        }
    }
}

/// Validation top-1 accuracy per head as `61.2 / 40.3 / …` percent (`n/a` without validation).
pub fn top1_percents(top1: &[f64]) -> String {
    let acc: Vec<String> = top1.iter().map(|&a| percent(a, 1)).collect();
    if acc.is_empty() {
        "n/a".into()
    } else {
        acc.join(" / ")
    }
}

/// A fraction as a percentage with `digits` decimals; `–` for NaN (a head that had no rows).
fn percent(fraction: f64, digits: usize) -> String {
    match fraction.is_nan() {
        true => "–".into(),
        false => format!("{:.*}", digits, fraction * 100.0),
    }
}

#[cfg(test)]
mod tests {
    use super::minutes;
    use std::time::Duration;

    #[test]
    fn durations_read_in_hours_minutes_or_seconds() {
        assert_eq!(minutes(Duration::from_secs(12)), "12s");
        assert_eq!(minutes(Duration::from_secs(185)), "3m05s");
        assert_eq!(minutes(Duration::from_secs(3720)), "1h02m");
    }
}
