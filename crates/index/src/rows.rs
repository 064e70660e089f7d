//! The table's Arrow schema, and conversion between [`Doc`]s and Arrow record batches.
//!
//! One row per document. The columns a query filters or matches on are real columns: `kind`,
//! `text` (full text), the dates (`Date32`, so that as-of filters compare dates in SQL), `path`
//! and `hash` (sync) and `vector`, a `FixedSizeList<Float32, dim>` of the embedder's
//! L2-normalised vector. What a search returns is one more column, `hit`: the whole [`Hit`]
//! but its score as a JSON object. A search leg reads that one column for its rows instead of
//! eight; every column read costs each leg a lookup per row, and at 100k rows the eight came
//! to a third of the leg's time.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, FixedSizeListArray, Float32Array, Float64Array, LargeStringArray,
    RecordBatch, StringArray, StringViewArray, UInt64Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use chrono::NaiveDate;
use sha2::{Digest, Sha256};

use serde::{Deserialize, Serialize};

use super::{Doc, DocKind, Hit, IndexError};

/// Version of the row layout and of [`content_hash`]; a change recreates the table.
pub(super) const SCHEMA_VERSION: u32 = 2;

pub(super) const KEY: &str = "key";
pub(super) const KIND: &str = "kind";
pub(super) const TEXT: &str = "text";
pub(super) const PATH: &str = "path";
pub(super) const VALID_FROM: &str = "valid_from";
pub(super) const VALID_UNTIL: &str = "valid_until";
pub(super) const PINNED: &str = "pinned";
pub(super) const HASH: &str = "hash";
pub(super) const HIT: &str = "hit";
pub(super) const VECTOR: &str = "vector";
/// The cosine distance lance computes for a vector search; not stored.
pub(super) const DISTANCE: &str = "_distance";
/// The BM25 score lance computes for a full-text search; not stored.
pub(super) const SCORE: &str = "_score";

/// The table schema for vectors of `dim` dimensions.
pub(super) fn schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY, DataType::Utf8, false),
        Field::new(KIND, DataType::Utf8, false),
        Field::new(TEXT, DataType::Utf8, false),
        Field::new(PATH, DataType::Utf8, false),
        Field::new(VALID_FROM, DataType::Date32, false),
        Field::new(VALID_UNTIL, DataType::Date32, true),
        Field::new(PINNED, DataType::Boolean, false),
        Field::new(HASH, DataType::Utf8, false),
        Field::new(HIT, DataType::Utf8, false),
        Field::new(
            VECTOR,
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32),
            true,
        ),
    ]))
}

/// The hash of everything a row stores about `doc` except its vector: kind, id, text, path,
/// sources, dates and pinned. Equal hashes mean the row is up to date.
pub fn content_hash(doc: &Doc) -> String {
    let canonical = serde_json::json!([
        SCHEMA_VERSION,
        doc.kind.as_str(),
        doc.id,
        doc.text,
        doc.path,
        doc.sources,
        doc.valid_from.to_string(),
        doc.valid_until.map(|d| d.to_string()),
        doc.pinned,
    ]);
    hex::encode(&Sha256::digest(canonical.to_string().as_bytes())[..16])
}

const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date");

pub(super) fn date_to_days(date: NaiveDate) -> i32 {
    (date - EPOCH).num_days() as i32
}

/// The inverse of [`date_to_days`].
pub(super) fn days_to_date(days: i32) -> NaiveDate {
    EPOCH + chrono::Duration::days(i64::from(days))
}

/// One record batch holding `docs` with their `hashes` and `vectors` (same order).
pub(super) fn batch(
    schema: &SchemaRef,
    docs: &[&Doc],
    hashes: &[String],
    vectors: &[Vec<f32>],
) -> Result<RecordBatch, ArrowError> {
    let dim = match schema.field_with_name(VECTOR)?.data_type() {
        DataType::FixedSizeList(_, dim) => *dim,
        other => return Err(ArrowError::SchemaError(format!("vector column has type {other}"))),
    };
    let strings =
        |f: &dyn Fn(&Doc) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(docs.iter().map(|d| f(d)))) };
    let mut flat = Vec::with_capacity(docs.len() * dim as usize);
    for vector in vectors {
        flat.extend_from_slice(vector);
    }
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let vector = FixedSizeListArray::try_new(item, dim, Arc::new(Float32Array::from(flat)), None)?;
    let columns: Vec<ArrayRef> = vec![
        strings(&|d| &d.key),
        strings(&|d| d.kind.as_str()),
        strings(&|d| &d.text),
        strings(&|d| &d.path),
        Arc::new(Date32Array::from_iter_values(docs.iter().map(|d| date_to_days(d.valid_from)))),
        Arc::new(Date32Array::from_iter(docs.iter().map(|d| d.valid_until.map(date_to_days)))),
        Arc::new(BooleanArray::from_iter(docs.iter().map(|d| Some(d.pinned)))),
        Arc::new(StringArray::from_iter_values(hashes)),
        Arc::new(StringArray::from_iter_values(docs.iter().map(|d| hit_json(d)))),
        Arc::new(vector),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, IndexError> {
    batch.column_by_name(name).ok_or_else(|| IndexError::Corrupt(format!("query result lacks column {name}")))
}

fn wrong_type(name: &str, array: &ArrayRef) -> IndexError {
    IndexError::Corrupt(format!("column {name} has unexpected type {}", array.data_type()))
}

/// A string column as owned strings (nulls become empty strings).
pub(super) fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<String>, IndexError> {
    let array = column(batch, name)?;
    let any = array.as_any();
    let out = if let Some(a) = any.downcast_ref::<StringArray>() {
        a.iter().map(|v| v.unwrap_or_default().to_string()).collect()
    } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
        a.iter().map(|v| v.unwrap_or_default().to_string()).collect()
    } else if let Some(a) = any.downcast_ref::<StringViewArray>() {
        a.iter().map(|v| v.unwrap_or_default().to_string()).collect()
    } else {
        return Err(wrong_type(name, array));
    };
    Ok(out)
}

/// A float column (`_distance`, `_score`) as f64 (nulls become NaN).
pub(super) fn floats(batch: &RecordBatch, name: &str) -> Result<Vec<f64>, IndexError> {
    let array = column(batch, name)?;
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<Float32Array>() {
        Ok(a.iter().map(|v| v.map_or(f64::NAN, f64::from)).collect())
    } else if let Some(a) = any.downcast_ref::<Float64Array>() {
        Ok(a.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
    } else {
        Err(wrong_type(name, array))
    }
}

/// The `_rowid` column a query asked for with `with_row_id`.
pub(super) fn row_ids(batch: &RecordBatch) -> Result<Vec<u64>, IndexError> {
    let array = column(batch, "_rowid")?;
    let ids = array.as_any().downcast_ref::<UInt64Array>().ok_or_else(|| wrong_type("_rowid", array))?;
    Ok(ids.values().to_vec())
}

/// The vector column, one `Vec<f32>` per row.
pub(super) fn vectors(batch: &RecordBatch, name: &str) -> Result<Vec<Vec<f32>>, IndexError> {
    let (dim, values) = flat_vectors(batch, name)?;
    Ok((0..batch.num_rows()).map(|row| values[row * dim..(row + 1) * dim].to_vec()).collect())
}

/// The vector column's width and its values, row after row.
pub(super) fn flat_vectors<'a>(batch: &'a RecordBatch, name: &str) -> Result<(usize, &'a [f32]), IndexError> {
    let array = column(batch, name)?;
    let list = array.as_any().downcast_ref::<FixedSizeListArray>().ok_or_else(|| wrong_type(name, array))?;
    let values = list.values().as_any().downcast_ref::<Float32Array>().ok_or_else(|| wrong_type(name, array))?;
    let dim = list.value_length() as usize;
    let start = list.offset() * dim;
    Ok((dim, &values.values()[start..start + list.len() * dim]))
}

/// A `Date32` column as days since 1970 (nulls become `None`).
pub(super) fn days(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i32>>, IndexError> {
    let array = column(batch, name)?;
    let a = array.as_any().downcast_ref::<Date32Array>().ok_or_else(|| wrong_type(name, array))?;
    Ok(a.iter().collect())
}

/// The `hit` column's JSON: a [`Hit`] without its score.
#[derive(Serialize, Deserialize)]
struct StoredHit<T> {
    key: T,
    id: T,
    kind: DocKind,
    text: T,
    path: T,
    sources: Vec<T>,
    valid_from: NaiveDate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    valid_until: Option<NaiveDate>,
}

fn hit_json(doc: &Doc) -> String {
    let stored = StoredHit {
        key: doc.key.as_str(),
        id: &doc.id,
        kind: doc.kind,
        text: &doc.text,
        path: &doc.path,
        sources: doc.sources.iter().map(String::as_str).collect(),
        valid_from: doc.valid_from,
        valid_until: doc.valid_until,
    };
    serde_json::to_string(&stored).expect("a hit serialises")
}

/// The `hit` column parsed, with score 0.
pub(super) fn hits(batch: &RecordBatch) -> Result<Vec<Hit>, IndexError> {
    strings(batch, HIT)?.iter().map(|json| hit(json)).collect()
}

/// One value of the `hit` column parsed, with score 0.
pub(super) fn hit(json: &str) -> Result<Hit, IndexError> {
    let h: StoredHit<String> =
        serde_json::from_str(json).map_err(|e| IndexError::Corrupt(format!("hit column holds {json:?}: {e}")))?;
    Ok(Hit {
        key: h.key,
        id: h.id,
        kind: h.kind,
        text: h.text,
        score: 0.0,
        sources: h.sources,
        path: h.path,
        valid_from: h.valid_from,
        valid_until: h.valid_until,
        space: None,
        similarity: None,
        related_to: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A date column (nulls become `None`).
    fn dates(batch: &RecordBatch, name: &str) -> Result<Vec<Option<NaiveDate>>, IndexError> {
        Ok(days(batch, name)?.into_iter().map(|v| v.map(days_to_date)).collect())
    }

    fn doc() -> Doc {
        Doc {
            key: "m-1".into(),
            id: "m-1".into(),
            kind: DocKind::Entry,
            text: "Lives in Lisbon.".into(),
            path: "consolidated/memory.md".into(),
            sources: vec!["f-1".into()],
            valid_from: NaiveDate::from_ymd_opt(2026, 5, 27).unwrap(),
            valid_until: None,
            pinned: false,
        }
    }

    #[test]
    fn content_hash_changes_with_every_stored_field_but_not_the_key() {
        let base = content_hash(&doc());
        assert_eq!(base.len(), 32);
        let changed: Vec<Doc> = vec![
            Doc { text: "Lives in Porto.".into(), ..doc() },
            Doc { kind: DocKind::History, ..doc() },
            Doc { id: "m-2".into(), ..doc() },
            Doc { path: "consolidated/history.md".into(), ..doc() },
            Doc { sources: vec!["f-1".into(), "f-2".into()], ..doc() },
            Doc { valid_from: NaiveDate::from_ymd_opt(2026, 5, 28).unwrap(), ..doc() },
            Doc { valid_until: NaiveDate::from_ymd_opt(2026, 6, 1), ..doc() },
            Doc { pinned: true, ..doc() },
        ];
        for d in &changed {
            assert_ne!(content_hash(d), base, "{d:?}");
        }
        assert_eq!(content_hash(&Doc { key: "other".into(), ..doc() }), base);
    }

    #[test]
    fn dates_round_trip_through_days() {
        for date in ["1970-01-01", "1969-12-31", "2026-11-22", "2100-02-28"] {
            let d: NaiveDate = date.parse().unwrap();
            assert_eq!(days_to_date(date_to_days(d)), d);
        }
    }

    #[test]
    fn batch_round_trips_docs() {
        let schema = schema(3);
        let d = Doc { valid_until: NaiveDate::from_ymd_opt(2026, 6, 1), ..doc() };
        let b = batch(&schema, &[&d], &[content_hash(&d)], &[vec![1.0, 0.0, 0.0]]).unwrap();
        assert_eq!(strings(&b, KEY).unwrap(), vec!["m-1"]);
        assert_eq!(strings(&b, KIND).unwrap(), vec!["entry"]);
        assert_eq!(dates(&b, VALID_UNTIL).unwrap(), vec![d.valid_until]);
        let hit = Hit {
            key: d.key.clone(),
            id: d.id.clone(),
            kind: d.kind,
            text: d.text.clone(),
            score: 0.0,
            sources: d.sources.clone(),
            path: d.path.clone(),
            valid_from: d.valid_from,
            valid_until: d.valid_until,
            space: None,
            similarity: None,
            related_to: None,
        };
        assert_eq!(hits(&b).unwrap(), vec![hit]);
        assert_eq!(vectors(&b, VECTOR).unwrap(), vec![vec![1.0, 0.0, 0.0]]);
    }
}
