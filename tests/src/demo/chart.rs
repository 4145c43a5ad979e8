//! The failover chart: for one load and one scenario whose primaries move, the throughput
//! of every client per 100 ms over the run with the faults marked, and below it the
//! histogram of the recovery times. Written as SVG next to the JSON. A run without faults
//! (a real cluster's layout as it is) gets the throughput alone: a client that stalls on a
//! refusal shows it there as gaps. The same throughput drawer draws the real-cluster
//! nemesis's timeline ([`write_timeline`]).

use std::path::Path;

use plotters::prelude::*;

use super::failover::Fault;
use super::report::Row;
use super::timeline::BUCKET;

/// Upper edges (ms) of the recovery histogram's bins; the last bin takes the rest.
const RECOVERY_BINS_MS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0, 2_000.0, 5_000.0,
];

/// One colour per client, in row order.
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(214, 39, 40),
    RGBColor(127, 127, 127),
];

/// Writes the chart of `rows` (one load, one scenario, one row per client) to `path`.
pub fn write(path: &Path, title: &str, rows: &[&Row]) -> Result<(), String> {
    draw(path, title, rows).map_err(|error| format!("{}: {error}", path.display()))
}

/// Writes the throughput of `rows` (one load, one scenario, one row per client, no faults)
/// to `path`.
pub fn write_throughput(path: &Path, title: &str, rows: &[&Row]) -> Result<(), String> {
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + 'static>> {
        let root = SVGBackend::new(path, (1100, 470)).into_drawing_area();
        root.fill(&WHITE)?;
        throughput(&root, title, rows)?;
        root.present()?;
        Ok(())
    })();
    drawn.map_err(|error| format!("{}: {error}", path.display()))
}

fn draw(
    path: &Path,
    title: &str,
    rows: &[&Row],
) -> Result<(), Box<dyn std::error::Error + 'static>> {
    let root = SVGBackend::new(path, (1100, 760)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(470);
    throughput(&upper, title, rows)?;
    recovery(&lower, rows)?;
    root.present()?;
    Ok(())
}

/// One curve of a throughput chart: its name in the legend and the messages acknowledged in
/// each [`BUCKET`] from the start of the run.
#[derive(Debug, Clone, Copy)]
pub struct Curve<'a> {
    /// The legend's name.
    pub name: &'a str,
    /// Messages per [`BUCKET`].
    pub per_bucket: &'a [u64],
}

/// A vertical line across a throughput chart at an instant of the run, labelled at its top
/// (a fault, a restart).
#[derive(Debug, Clone)]
pub struct Marker {
    /// Offset from the start of the run.
    pub at: std::time::Duration,
    /// The label.
    pub label: String,
    /// The line's and the label's colour.
    pub colour: RGBColor,
}

/// The colour of a crash or a kill.
pub const CRASH: RGBColor = RGBColor(214, 39, 40);
/// The colour of a move, a view change or a pause.
pub const MOVE: RGBColor = RGBColor(255, 127, 14);
/// The colour of a restart or a resume.
pub const RESTART: RGBColor = RGBColor(44, 160, 44);

/// Writes a throughput chart of `curves` over `run`, with `markers`, to `path`: the demo's
/// own drawer, for runs that are not a demo row (the real-cluster nemesis).
pub fn write_timeline(
    path: &Path,
    title: &str,
    curves: &[Curve<'_>],
    markers: &[Marker],
    run: std::time::Duration,
) -> Result<(), String> {
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + 'static>> {
        let root = SVGBackend::new(path, (1100, 470)).into_drawing_area();
        root.fill(&WHITE)?;
        draw_throughput(&root, title, curves, markers, run.as_secs_f64())?;
        root.present()?;
        Ok(())
    })();
    drawn.map_err(|error| format!("{}: {error}", path.display()))
}

fn throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    rows: &[&Row],
) -> Result<(), Box<dyn std::error::Error + 'static>>
where
    DB::ErrorType: 'static,
{
    let curves: Vec<Curve<'_>> = rows
        .iter()
        .map(|row| Curve {
            name: row.client.name(),
            per_bucket: row.measurement.timeline.messages_per_bucket(),
        })
        .collect();
    let run_seconds = rows
        .iter()
        .map(|row| row.measurement.wall.as_secs_f64())
        .fold(1.0, f64::max);
    let mut markers = Vec::new();
    if let Some(recovery) = rows.iter().find_map(|row| row.recovery.as_ref()) {
        for timed in &recovery.faults {
            let colour = match timed.fault {
                Fault::Move { .. } | Fault::ViewChange { .. } => MOVE,
                Fault::Crash { .. } => CRASH,
                Fault::Restart { .. } => RESTART,
            };
            // A move is labelled with its partition and nodes only, so nine fit.
            let label = match &timed.fault {
                Fault::Move {
                    partition,
                    from,
                    to,
                } => format!("p{partition} {from}>{to}"),
                other
                @ (Fault::Crash { .. } | Fault::ViewChange { .. } | Fault::Restart { .. }) => {
                    other.label()
                }
            };
            markers.push(Marker {
                at: timed.at,
                label,
                colour,
            });
        }
    }
    draw_throughput(area, title, &curves, &markers, run_seconds)
}

fn draw_throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    curves: &[Curve<'_>],
    markers: &[Marker],
    run_seconds: f64,
) -> Result<(), Box<dyn std::error::Error + 'static>>
where
    DB::ErrorType: 'static,
{
    let per_second = 1.0 / BUCKET.as_secs_f64();
    let series: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|curve| {
            curve
                .per_bucket
                .iter()
                .enumerate()
                .map(|(bucket, &messages)| {
                    (
                        bucket as f64 * BUCKET.as_secs_f64(),
                        messages as f64 * per_second,
                    )
                })
                .collect()
        })
        .collect();
    let top = series
        .iter()
        .flatten()
        .map(|&(_, rate)| rate)
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..run_seconds.max(1.0), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc("acknowledged msg/s (100 ms buckets)")
        // Thousands read better on the demo's rates; a slow real cluster's are in the
        // hundreds, which thousands would round to 0k and 1k.
        .y_label_formatter(&|rate| {
            if top < 10_000.0 {
                format!("{rate:.0}")
            } else {
                format!("{:.0}k", rate / 1_000.0)
            }
        })
        .draw()?;
    // The faults, as vertical lines under the curves.
    for marker in markers {
        let at = marker.at.as_secs_f64();
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(at, 0.0), (at, top)],
            marker.colour.stroke_width(1),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            marker.label.clone(),
            (at, top * 0.97),
            ("sans-serif", 13).into_font().color(&marker.colour),
        )))?;
    }
    for (index, (curve, points)) in curves.iter().zip(series).enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(curve.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn recovery<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[&Row],
) -> Result<(), Box<dyn std::error::Error + 'static>>
where
    DB::ErrorType: 'static,
{
    let bins = RECOVERY_BINS_MS.len() + 1;
    let counts: Vec<Vec<u32>> = rows
        .iter()
        .map(|row| {
            let mut counts = vec![0u32; bins];
            if let Some(recovery) = row.recovery.as_ref() {
                for sample in &recovery.samples {
                    let ms = sample.as_secs_f64() * 1_000.0;
                    let bin = RECOVERY_BINS_MS
                        .iter()
                        .position(|&edge| ms <= edge)
                        .unwrap_or(bins - 1);
                    counts[bin] += 1;
                }
            }
            counts
        })
        .collect();
    let top = counts.iter().flatten().copied().max().unwrap_or(1).max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "recovery: first refusal (or crash) to the partition's next acknowledged send",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5..bins as f64 - 0.5, 0.0..f64::from(top) * 1.15)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bins)
        .x_label_formatter(&|x| bin_label(*x))
        .y_desc("partitions")
        .y_labels(usize::try_from(top).unwrap_or(10).min(10) + 1)
        .y_label_formatter(&|count| {
            if (count - count.round()).abs() < 1e-6 {
                format!("{count:.0}")
            } else {
                String::new()
            }
        })
        .draw()?;
    let width = 0.8 / rows.len().max(1) as f64;
    for (index, (row, counts)) in rows.iter().zip(&counts).enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        let left = -0.4 + width * index as f64;
        chart
            .draw_series(counts.iter().enumerate().filter(|(_, n)| **n > 0).map(
                |(bin, &count)| {
                    let x = bin as f64 + left;
                    Rectangle::new([(x, 0.0), (x + width, f64::from(count))], colour.filled())
                },
            ))?
            .label(row.client.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The label under bin `x` (ticks fall on the bins' centres, the integers): `<=5ms`, and
/// `>5s` for the last one.
fn bin_label(x: f64) -> String {
    if (x - x.round()).abs() > 0.01 || x < -0.01 {
        return String::new();
    }
    let bin = x.round() as usize;
    match RECOVERY_BINS_MS.get(bin) {
        Some(&edge) if edge >= 1_000.0 => format!("<={:.0}s", edge / 1_000.0),
        Some(&edge) => format!("<={edge:.0}ms"),
        None => format!(
            ">{:.0}s",
            RECOVERY_BINS_MS[RECOVERY_BINS_MS.len() - 1] / 1_000.0
        ),
    }
}
