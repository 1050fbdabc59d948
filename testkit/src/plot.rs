//! The SVG plots, drawn with plotters' SVG backend (which escapes every text it writes): the
//! benchmark's latencies ([`LatencyPlot`], one row per kind of handover on a log time axis) and
//! the chaos command's timeline ([`Timeline`], one row per daemon: who led when, and the faults).
//! Both take plain data, so that the programs need no plotting of their own.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::time::Duration;

/// A colour, as the programs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// `#rrggbb`.
    pub fn hex(code: &str) -> Self {
        let byte = |i: usize| u8::from_str_radix(&code[i..i + 2], 16).expect("#rrggbb");
        Self(byte(1), byte(3), byte(5))
    }

    /// From hue (degrees), saturation and lightness (0 to 1).
    pub fn hsl(hue: f64, saturation: f64, lightness: f64) -> Self {
        let (r, g, b) = HSLColor(hue / 360.0, saturation, lightness).rgb();
        Self(r, g, b)
    }

    fn colour(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }
}

const GREY: RGBColor = RGBColor(0x55, 0x55, 0x55);
const LIGHT: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);
const DOT: RGBColor = RGBColor(0x1f, 0x6f, 0xb4);
const TARGET: RGBColor = RGBColor(0xc6, 0x28, 0x28);

/// What drawing on an SVG can fail with.
type DrawError = DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>;

/// An SVG document of `size` pixels, drawn by `draw`.
fn render(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), DrawError>,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root).expect("draw the plot");
        root.present().expect("finish the plot");
    }
    svg
}

/// Sans-serif at `size` pixels (plotters writes 1/1.24 of the size it is given).
fn font(size: u32) -> FontDesc<'static> {
    ("sans-serif", size as f64 * 1.24).into_font()
}

/// A plot of latencies: one row per kind, every sample a dot on a log time axis from 10 ms to
/// 30 s, the measured p50 and p95 as ticks, the targets as red marks.
#[derive(Debug, Clone, Default)]
pub struct LatencyPlot {
    pub title: String,
    /// Lines under the title; `true` draws one highlighted (a note about the run).
    pub subtitle: Vec<(String, bool)>,
    pub rows: Vec<LatencyRow>,
    /// What the marks mean, under the axis.
    pub caption: String,
}

/// One row of a [`LatencyPlot`].
#[derive(Debug, Clone, Default)]
pub struct LatencyRow {
    pub name: String,
    /// Under the name, e.g. "n=20 · p50 438 ms · p95 980 ms · max 1.11 s".
    pub summary: String,
    pub samples: Vec<Duration>,
    pub p50: Option<Duration>,
    pub p95: Option<Duration>,
    /// Targets and their names (`p50`, `max`...).
    pub targets: Vec<(Duration, String)>,
}

/// "10 ms", "1 s": the axis labels.
fn axis_time(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.0} s")
    }
}

impl LatencyPlot {
    /// The SVG document.
    pub fn svg(&self) -> String {
        let top = 30 + 16 * self.subtitle.len() as u32;
        let height = top + 64 * self.rows.len() as u32 + 70;
        render((960, height), |root| self.draw(root, top))
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>, top: u32) -> Result<(), DrawError> {
        root.fill(&WHITE)?;
        root.draw(&Text::new(
            self.title.as_str(),
            (12, 8),
            font(15).style(FontStyle::Bold),
        ))?;
        for (i, (line, highlight)) in self.subtitle.iter().enumerate() {
            let colour = if *highlight {
                RGBColor(0xb3, 0x59, 0)
            } else {
                GREY
            };
            root.draw(&Text::new(
                line.as_str(),
                (12, 30 + 16 * i as i32),
                font(12).color(&colour),
            ))?;
        }
        let (_, below) = root.split_vertically(top);
        let (plot_area, caption_area) = below.split_vertically(below.dim_in_pixel().1 - 26);
        let n = self.rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&plot_area)
            .margin_right(30)
            .margin_bottom(24)
            .margin_left(308)
            .build_cartesian_2d((0.01f64..30.0).log_scale(), 0.0..n)?;
        // The grid: a light line at every 1, 2 and 5 of each decade, labelled under the axis.
        let ticks = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0];
        chart.draw_series(
            ticks
                .iter()
                .map(|t| PathElement::new(vec![(*t, 0.0), (*t, n)], LIGHT)),
        )?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.01, 0.0), (30.0, 0.0)],
            RGBColor(0xcc, 0xcc, 0xcc),
        )))?;
        for t in ticks {
            let (px, py) = chart.backend_coord(&(t, 0.0));
            root.draw(&Text::new(
                axis_time(t),
                (px, py + 6),
                font(12).color(&GREY).pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        for (i, row) in self.rows.iter().enumerate() {
            let y0 = n - i as f64;
            let mid = y0 - 0.5;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(0.01, y0), (30.0, y0)],
                RGBColor(0xcc, 0xcc, 0xcc),
            )))?;
            let (_, py) = chart.backend_coord(&(0.01, mid));
            root.draw(&Text::new(
                row.name.as_str(),
                (12, py - 16),
                font(12).style(FontStyle::Bold),
            ))?;
            root.draw(&Text::new(
                row.summary.as_str(),
                (12, py + 2),
                font(12).color(&RGBColor(0x33, 0x33, 0x33)),
            ))?;
            let x = |d: &Duration| d.as_secs_f64().clamp(0.01, 30.0);
            // A fixed spread instead of random jitter, so two runs of the same data draw alike.
            chart.draw_series(row.samples.iter().enumerate().map(|(j, d)| {
                let dy = ((j * 7) % 11) as i32 * 3 - 15;
                EmptyElement::at((x(d), mid)) + Circle::new((0, dy), 4, DOT.mix(0.55).filled())
            }))?;
            let measured = [(row.p50, "p50", BLACK, -24), (row.p95, "p95", GREY, -12)];
            for (value, name, colour, label_y) in measured {
                let Some(value) = value else { continue };
                chart.draw_series(std::iter::once(
                    EmptyElement::at((x(&value), mid))
                        + PathElement::new(vec![(0, -26), (0, 26)], colour.stroke_width(2))
                        + Text::new(name, (3, label_y), font(10).color(&colour)),
                ))?;
            }
            chart.draw_series(row.targets.iter().map(|(value, name)| {
                EmptyElement::at((x(value), mid))
                    + PathElement::new(vec![(0, 14), (0, 30)], TARGET.stroke_width(2))
                    + Text::new(name.clone(), (3, 20), font(10).color(&TARGET))
            }))?;
        }
        caption_area.draw(&Text::new(
            self.caption.as_str(),
            (12, 8),
            font(12).color(&GREY),
        ))?;
        Ok(())
    }
}

/// A timeline of who led when: one row per daemon and one for faults that hit everyone; bars
/// for children's lives, shaded spans where a daemon was down, fault marks under the bars,
/// vertical lines at notable instants (overlaps), and numbered ticks on top (trials).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub title: String,
    /// How long the run took: the x axis, in minutes.
    pub span: Duration,
    /// The daemons' rows, top to bottom.
    pub rows: Vec<String>,
    /// The name of the last row, for what hit every daemon (storage faults).
    pub everyone: String,
    pub bars: Vec<Bar>,
    pub shades: Vec<Bar>,
    /// Fault marks; `row: None` is the everyone row.
    pub marks: Vec<Mark>,
    pub lines: Vec<(Duration, Rgb)>,
    /// Numbered ticks above the rows.
    pub ticks: Vec<(Duration, String)>,
    /// Colour swatches and what they mean, under the plot.
    pub legend: Vec<(String, Rgb)>,
    /// A last line under the legend.
    pub caption: String,
}

/// A span on a row of a [`Timeline`], from its start.
#[derive(Debug, Clone)]
pub struct Bar {
    pub row: usize,
    pub from: Duration,
    pub to: Duration,
    pub fill: Rgb,
    /// Drawn around the bar.
    pub outline: Option<Rgb>,
    /// Written on the bar, when it is wide enough.
    pub label: String,
}

/// A fault on a row of a [`Timeline`] (under the daemon's bars), or on the everyone row.
#[derive(Debug, Clone)]
pub struct Mark {
    pub row: Option<usize>,
    pub from: Duration,
    pub to: Duration,
    pub fill: Rgb,
}

impl Timeline {
    /// The SVG document: 1200 pixels for the run, at least a minute's worth.
    pub fn svg(&self) -> String {
        let minutes = self.span.as_secs_f64().max(1.0) / 60.0;
        let width = 70 + (1200.0 * minutes / minutes.max(1.0)) as u32 + 30;
        // Below the rows: the axis labels, the legend's lines and the caption.
        let legend = self.legend_places(width).last().map_or(3, |p| p.1) as u32;
        let height = 60 + 34 * (self.rows.len() as u32 + 1) + 24 + legend + 50;
        render((width, height), |root| self.draw(root, minutes))
    }

    /// Where each legend swatch goes, left to right on as many lines of 18 pixels as a
    /// drawing `width` wide needs.
    fn legend_places(&self, width: u32) -> Vec<(i32, i32)> {
        let (mut lx, mut ly) = (70, 3);
        let mut places = Vec::new();
        for (name, _) in &self.legend {
            let room = 20 + 7 * name.chars().count() as i32;
            if lx + room > width as i32 - 30 && lx > 70 {
                (lx, ly) = (70, ly + 18);
            }
            places.push((lx, ly));
            lx += room;
        }
        places
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>, minutes: f64) -> Result<(), DrawError> {
        root.fill(&WHITE)?;
        root.draw(&Text::new(self.title.as_str(), (12, 6), font(14)))?;
        let (plot_area, legend_area) =
            root.split_vertically(60 + 34 * (self.rows.len() as u32 + 1) + 24);
        let n = self.rows.len() as f64 + 1.0;
        let mut chart = ChartBuilder::on(&plot_area)
            .margin_top(44)
            .margin_right(30)
            .margin_bottom(24)
            .margin_left(70)
            .build_cartesian_2d(0.0..minutes, 0.0..n)?;
        // A light line and a label at every whole minute.
        let bottom = chart.backend_coord(&(0.0, 0.0)).1;
        for m in (0..=minutes.floor() as u32).map(f64::from) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(m, 0.0), (m, n)],
                RGBColor(0xdd, 0xdd, 0xdd),
            )))?;
            let (px, _) = chart.backend_coord(&(m, 0.0));
            root.draw(&Text::new(
                format!("{m}m"),
                (px, bottom + 4),
                font(11).color(&GREY).pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        let x = |d: Duration| (d.as_secs_f64() / 60.0).min(minutes);
        // Row r spans y in [n - r - 1, n - r]: bars in its upper part, fault marks below.
        let top_of = |r: usize| n - r as f64;
        for (r, name) in self
            .rows
            .iter()
            .chain(std::iter::once(&self.everyone))
            .enumerate()
        {
            let (_, py) = chart.backend_coord(&(0.0, top_of(r) - 0.35));
            root.draw(&Text::new(name.as_str(), (8, py - 6), font(11)))?;
        }
        let span = |row: usize, from: Duration, to: Duration, (lo, hi): (f64, f64)| {
            let (a, b) = (x(from), x(to).max(x(from) + minutes / 1200.0));
            [(a, top_of(row) - hi), (b, top_of(row) - lo)]
        };
        chart.draw_series(self.shades.iter().map(|s| {
            Rectangle::new(
                span(s.row, s.from, s.to, (0.05, 0.65)),
                s.fill.colour().filled(),
            )
        }))?;
        for bar in &self.bars {
            let corners = span(bar.row, bar.from, bar.to, (0.05, 0.65));
            chart.draw_series(std::iter::once(Rectangle::new(
                corners,
                bar.fill.colour().filled(),
            )))?;
            if let Some(outline) = bar.outline {
                chart.draw_series(std::iter::once(Rectangle::new(
                    corners,
                    outline.colour().stroke_width(2),
                )))?;
            }
            let (left, _) = chart.backend_coord(&corners[0]);
            let (right, _) = chart.backend_coord(&corners[1]);
            if right - left > 16 {
                chart.draw_series(std::iter::once(
                    EmptyElement::at((corners[0].0, top_of(bar.row) - 0.35))
                        + Text::new(bar.label.clone(), (2, -4), font(9)),
                ))?;
            }
        }
        chart.draw_series(self.marks.iter().map(|m| {
            let (row, band) = match m.row {
                Some(row) => (row, (0.72, 0.92)),
                None => (self.rows.len(), (0.05, 0.65)),
            };
            Rectangle::new(
                span(row, m.from, m.to, band),
                m.fill.colour().mix(0.8).filled(),
            )
        }))?;
        chart.draw_series(self.lines.iter().map(|(at, colour)| {
            PathElement::new(
                vec![(x(*at), 1.0), (x(*at), n)],
                colour.colour().stroke_width(2),
            )
        }))?;
        chart.draw_series(self.ticks.iter().map(|(at, name)| {
            EmptyElement::at((x(*at), n))
                + PathElement::new(vec![(0, -10), (0, -4)], GREY)
                + Text::new(name.clone(), (1, -22), font(8).color(&GREY))
        }))?;
        let width = legend_area.dim_in_pixel().0;
        let places = self.legend_places(width);
        for ((name, colour), (lx, ly)) in self.legend.iter().zip(&places) {
            legend_area.draw(&Rectangle::new(
                [(*lx, ly + 1), (lx + 12, ly + 11)],
                colour.colour().filled(),
            ))?;
            legend_area.draw(&Text::new(name.as_str(), (lx + 15, *ly), font(11)))?;
        }
        let ly = places.last().map_or(3, |p| p.1);
        legend_area.draw(&Text::new(self.caption.as_str(), (70, ly + 21), font(11)))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_every_row_is_named() {
        let plot = LatencyPlot {
            title: "a <plot> & more".into(),
            subtitle: vec![("note: x < y".into(), true)],
            rows: vec![LatencyRow {
                name: "graceful".into(),
                samples: vec![Duration::from_millis(300), Duration::from_secs(40)],
                p50: Some(Duration::from_millis(300)),
                targets: vec![(Duration::from_millis(600), "p50".into())],
                ..LatencyRow::default()
            }],
            caption: "dots".into(),
        }
        .svg();
        assert!(plot.starts_with("<svg"), "{plot}");
        assert!(plot.contains("a &lt;plot&gt; &amp; more"), "{plot}");
        let texts: Vec<&str> = plot.lines().map(str::trim).collect();
        for text in ["graceful", "10 ms", "500 ms", "20 s"] {
            assert!(texts.contains(&text), "{text}: {plot}");
        }

        let timeline = Timeline {
            title: "who led when".into(),
            span: Duration::from_secs(90),
            rows: vec!["d1".into(), "d2".into()],
            everyone: "storage".into(),
            bars: vec![Bar {
                row: 1,
                from: Duration::from_secs(1),
                to: Duration::from_secs(50),
                fill: Rgb::hsl(120.0, 0.55, 0.6),
                outline: Some(Rgb::hex("#9467bd")),
                label: "…4354".into(),
            }],
            ..Timeline::default()
        }
        .svg();
        let texts: Vec<&str> = timeline.lines().map(str::trim).collect();
        for text in ["d1", "d2", "storage", "…4354", "0m", "1m"] {
            assert!(texts.contains(&text), "{text}: {timeline}");
        }
    }
}
