//! `plot.svg`: tokens/step τ and decode speedup per method, as two bar charts with the
//! `ar` level (1) marked and the speedup's 95 % interval drawn as a whisker.

use plotters::prelude::*;

use crate::error::EvalError;
use crate::summary::Summary;

/// File name of the plot inside an eval directory.
pub const PLOT_FILE: &str = "plot.svg";

const BAR: RGBColor = RGBColor(70, 130, 180);

/// Renders the plot as SVG text.
pub fn render_plot(summary: &Summary) -> Result<String, EvalError> {
    let names: Vec<&str> = summary.iter().map(|(m, _)| m.name()).collect();
    let tau: Vec<f64> = summary.iter().map(|(_, s)| s.tokens_per_step).collect();
    let speedup: Vec<f64> = summary.iter().map(|(_, s)| s.speedup.unwrap_or(0.0)).collect();
    let intervals: Vec<Option<[f64; 2]>> = summary.iter().map(|(_, s)| s.speedup_interval).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (400 + 160 * names.len() as u32, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let panels = root.split_evenly((1, 2));
        bars(&panels[0], "tokens / step (τ)", &names, &tau, &[])?;
        bars(&panels[1], "speedup vs ar (decode, 95 % interval)", &names, &speedup, &intervals)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

fn plot_err(e: impl std::fmt::Display) -> EvalError {
    EvalError::Plot { problem: e.to_string() }
}

fn bars(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    names: &[&str],
    values: &[f64],
    intervals: &[Option<[f64; 2]>],
) -> Result<(), EvalError> {
    let highest = intervals.iter().flatten().map(|i| i[1]);
    let top = values.iter().copied().chain(highest).fold(1.0_f64, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(44)
        .build_cartesian_2d((0..names.len().saturating_sub(1)).into_segmented(), 0.0..top)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len())
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).map_or_else(String::new, |n| n.to_string()),
            _ => String::new(),
        })
        .draw()
        .map_err(plot_err)?;
    // One rectangle per method, drawn in run order (plotters' `Histogram` sums its data in a
    // hash map first, so the same summary gave differently ordered SVG elements).
    chart
        .draw_series(values.iter().enumerate().map(|(i, &v)| {
            let mut bar =
                Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), v)], BAR.filled());
            bar.set_margin(0, 0, 24, 24);
            bar
        }))
        .map_err(plot_err)?;
    // Whiskers over the bars that have an interval.
    chart
        .draw_series(intervals.iter().enumerate().filter_map(|(i, v)| {
            v.map(|[lo, hi]| {
                PathElement::new(
                    [(SegmentValue::CenterOf(i), lo), (SegmentValue::CenterOf(i), hi)],
                    BLACK.stroke_width(2),
                )
            })
        }))
        .map_err(plot_err)?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, &v)| {
            // Above the whisker, where there is one.
            let above = intervals.get(i).copied().flatten().map_or(v, |[_, hi]| hi.max(v));
            Text::new(format!("{v:.2}"), (SegmentValue::CenterOf(i), above + top * 0.02), ("sans-serif", 14))
        }))
        .map_err(plot_err)?;
    let level = [(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)];
    chart.draw_series(LineSeries::new(level, RED.stroke_width(1))).map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::record;
    use crate::summary::summarize;
    use draftsmith_decode::Method;

    #[test]
    fn the_plot_is_svg_naming_every_method() {
        let summary = summarize(
            &[record("p", "ar", &[1, 2], &[]), record("p", "prompt-lookup", &[1, 2], &[(1, 2)])],
            &[Method::Ar, Method::PromptLookup],
        );
        let svg = render_plot(&summary).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("prompt-lookup") && svg.contains("\nar\n"), "{svg}");
    }

    #[test]
    fn the_same_summary_renders_the_same_file() {
        let names = ["ar", "prompt-lookup", "ngram-trie", "token-cache", "redrafter"];
        let records: Vec<_> =
            names.iter().enumerate().map(|(i, m)| record("p", m, &[1, 2], &vec![(1, 2); i.min(1)])).collect();
        let methods: Vec<Method> = names.iter().map(|m| m.parse().unwrap()).collect();
        let summary = summarize(&records, &methods);
        let svg = render_plot(&summary).unwrap();
        for _ in 0..3 {
            assert_eq!(render_plot(&summary).unwrap(), svg);
        }
    }
}
