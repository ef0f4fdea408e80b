//! Workbooks (XLSX, XLS, ODS) by `calamine`: each sheet as rows of
//! tab-separated cells under its name, formulas as the values last saved
//! with them, dates as ISO 8601.

use std::io::{Cursor, Read, Seek};

use calamine::{Data, Ods, Reader, Xls, Xlsx};

use crate::detect::Format;
use crate::text::Extracted;

pub fn extract(format: Format, bytes: &[u8]) -> Result<Extracted, String> {
    let cursor = Cursor::new(bytes);
    let error = |e: &dyn std::fmt::Display| format!("its workbook does not read ({e})");
    match format {
        Format::Xlsx => sheets(Xlsx::new(cursor).map_err(|e| error(&e))?),
        Format::Xls => sheets(Xls::new(cursor).map_err(|e| error(&e))?),
        _ => sheets(Ods::new(cursor).map_err(|e| error(&e))?),
    }
}

fn sheets<RS, R>(mut book: R) -> Result<Extracted, String>
where
    RS: Read + Seek,
    R: Reader<RS>,
    R::Error: std::fmt::Display,
{
    let mut parts = Vec::new();
    for name in book.sheet_names() {
        let range = book
            .worksheet_range(&name)
            .map_err(|e| format!("its sheet '{name}' does not read ({e})"))?;
        let mut rows = String::new();
        for row in range.rows() {
            let cells: Vec<String> = row.iter().map(cell).collect();
            let used = cells
                .iter()
                .rposition(|c| !c.is_empty())
                .map_or(0, |i| i + 1);
            rows.push_str(&cells[..used].join("\t"));
            rows.push('\n');
        }
        parts.push((Some(name), rows));
    }
    Ok(Extracted::parts("sheet", parts))
}

/// A cell as text: tabs and line breaks inside it would break its row.
fn cell(data: &Data) -> String {
    let text = match data {
        Data::DateTime(d) if d.is_datetime() => {
            let (y, mo, d, h, mi, s, _) = d.to_ymd_hms_milli();
            if (h, mi, s) == (0, 0, 0) {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            }
        }
        other => other.to_string(),
    };
    text.replace(['\t', '\n', '\r'], " ")
}
