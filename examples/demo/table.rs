//! A tiny table printer and the number formats the tables use.

use std::time::Duration;

/// Rows of cells; the first column is left-aligned, the others right-aligned
/// unless [`left`](Table::left) says otherwise.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl Table {
    pub fn new<S: ToString>(header: &[S]) -> Table {
        Table {
            header: header.iter().map(ToString::to_string).collect(),
            rows: Vec::new(),
            left: vec![0],
        }
    }

    /// Left-aligns these columns too.
    pub fn left(mut self, columns: &[usize]) -> Table {
        self.left.extend_from_slice(columns);
        self
    }

    pub fn row<S: ToString>(&mut self, cells: &[S]) {
        self.rows
            .push(cells.iter().map(ToString::to_string).collect());
    }

    pub fn print(&self) {
        let columns = self.header.len();
        let width = |c: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let line = |cells: &[String]| {
            let mut out = String::from("  ");
            for (c, w) in widths.iter().enumerate() {
                let cell = cells.get(c).map_or("", String::as_str);
                let gap = if c == 0 { "" } else { "   " };
                if self.left.contains(&c) {
                    out += &format!("{gap}{cell:<w$}");
                } else {
                    out += &format!("{gap}{cell:>w$}");
                }
            }
            println!("{}", out.trim_end());
        };
        line(&self.header);
        let total: usize = widths.iter().sum::<usize>() + 3 * (columns - 1);
        println!("  {}", "─".repeat(total));
        for row in &self.rows {
            line(row);
        }
    }
}

/// `0 ms`, `80 ms`, `8 s`, `1.10 s`, `12.8 s`.
pub fn dur(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 && !d.is_zero() {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    } else if d.subsec_nanos() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 10_000.0 {
        format!("{:.2} s", ms / 1e3)
    } else {
        format!("{:.1} s", ms / 1e3)
    }
}

/// `12,345`.
pub fn int(n: impl Into<u64>) -> String {
    let s = n.into().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A section title.
pub fn title(text: &str) {
    println!();
    println!("{text}");
    println!("{}", "═".repeat(text.chars().count()));
}
