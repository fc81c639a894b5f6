//! Table-driven conversion of an encoded Kubernetes message into the JSON Go would write for it.
//!
//! Go's generated marshallers always write non-pointer scalars (even zeros) and never write nil
//! pointers, slices or maps; `encoding/json` then applies `omitempty`. Replaying both rules
//! from the field flags gives the same JSON the apiserver would produce from the decoded object.

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use super::format;
use super::schema_types::{message, Field, Kind, Rep, Shape, INLINE, OMITEMPTY, POINTER};
use super::wire::{Reader, Wire};
use super::ProtoError;

/// Nesting deeper than any real object, so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 100;

/// Fields and values a body may still decode to. Every field on the wire costs at least two bytes, but
/// an empty message costs two bytes too and decodes to its whole zero value (Go writes every non-pointer
/// struct and scalar): a 3 MB Pod of 1.5 million empty containers once decoded for 17 s into 3.7 GB.
/// The budget keeps what a body decodes to, and the fields gathered on the way, proportional to its
/// size, at about the density of real objects (strings make most of their bytes).
pub(super) struct Budget(std::cell::Cell<usize>);

impl Budget {
    /// The budget of a body of `len` bytes: one per eight bytes, and room for any small object.
    pub(super) fn of(len: usize) -> Budget {
        Budget::values(len / 8 + 10_000)
    }

    /// A budget of `n` values.
    pub(super) fn values(n: usize) -> Budget {
        Budget(std::cell::Cell::new(n))
    }

    pub(super) fn spend(&self, n: usize) -> Result<(), ProtoError> {
        let left = self.0.get().checked_sub(n).ok_or(ProtoError::Expands)?;
        self.0.set(left);
        Ok(())
    }
}

/// Decodes `bytes` as message `index` into its JSON value.
pub(super) fn decode_message(bytes: &[u8], index: u16, depth: usize, budget: &Budget) -> Result<Value, ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep);
    }
    budget.spend(1)?;
    let msg = message(index);
    let occ = collect(bytes, msg.fields, budget)?;
    match msg.shape {
        Shape::Object => object(msg.fields, &occ, depth, budget),
        Shape::Time => {
            // apimachinery decodes empty bytes as the zero time, which marshals as null.
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            let secs = last_varint(&occ, msg.fields, 1)?.unwrap_or(0) as i64;
            Ok(Value::String(format::time(secs)?))
        }
        Shape::MicroTime => {
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            let secs = last_varint(&occ, msg.fields, 1)?.unwrap_or(0) as i64;
            let nanos = i64::from(last_varint(&occ, msg.fields, 2)?.unwrap_or(0) as i32);
            Ok(Value::String(format::micro_time(secs, nanos)?))
        }
        Shape::Duration => {
            let ns = last_varint(&occ, msg.fields, 1)?.unwrap_or(0) as i64;
            Ok(Value::String(format::duration(ns)))
        }
        Shape::IntOrString => {
            let ty = last_varint(&occ, msg.fields, 1)?.unwrap_or(0);
            if ty == 1 {
                let s = last_bytes(&occ, msg.fields, 3)?.unwrap_or_default();
                Ok(Value::String(String::from_utf8_lossy(s).into_owned()))
            } else {
                let n = last_varint(&occ, msg.fields, 2)?.unwrap_or(0) as i32;
                Ok(Value::from(n))
            }
        }
        Shape::Quantity => {
            let s = last_bytes(&occ, msg.fields, 1)?.unwrap_or_default();
            // The zero Quantity marshals as "0" in Go.
            if s.is_empty() {
                Ok(Value::String("0".into()))
            } else {
                Ok(Value::String(String::from_utf8_lossy(s).into_owned()))
            }
        }
        Shape::RawJson => match last_bytes(&occ, msg.fields, 1)? {
            None | Some([]) => Ok(Value::Null),
            Some(raw) => raw_json(raw, depth, budget),
        },
        Shape::Items => {
            let field = by_tag(msg.fields, 1)?;
            Ok(list(field, occ_of(&occ, msg.fields, 1), depth, budget)?.unwrap_or(Value::Null))
        }
        Shape::SchemaOrArray => {
            let items = list(by_tag(msg.fields, 2)?, occ_of(&occ, msg.fields, 2), depth, budget)?;
            match items {
                Some(v) => Ok(v),
                None => schema_or_null(msg.fields, &occ, 1, depth, budget),
            }
        }
        Shape::SchemaOrBool => {
            if occ_of(&occ, msg.fields, 2).is_empty() {
                let allows = last_varint(&occ, msg.fields, 1)?.unwrap_or(0) != 0;
                Ok(Value::Bool(allows))
            } else {
                schema_or_null(msg.fields, &occ, 2, depth, budget)
            }
        }
        Shape::SchemaOrStringArray => {
            let items = list(by_tag(msg.fields, 2)?, occ_of(&occ, msg.fields, 2), depth, budget)?;
            match items {
                Some(v) => Ok(v),
                None => schema_or_null(msg.fields, &occ, 1, depth, budget),
            }
        }
    }
}

/// Groups the wire payloads by schema field; unknown fields are skipped like Go skips them.
fn collect<'a>(bytes: &'a [u8], fields: &[Field], budget: &Budget) -> Result<Vec<Vec<Wire<'a>>>, ProtoError> {
    let mut occ = vec![Vec::new(); fields.len()];
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        if let Some(i) = fields.iter().position(|f| f.tag == tag) {
            budget.spend(1)?;
            occ[i].push(value);
        }
    }
    Ok(occ)
}

fn by_tag(fields: &[Field], tag: u32) -> Result<&Field, ProtoError> {
    fields.iter().find(|f| f.tag == tag).ok_or_else(|| ProtoError::Malformed(format!("schema has no field {tag}")))
}

fn occ_of<'o, 'a>(occ: &'o [Vec<Wire<'a>>], fields: &[Field], tag: u32) -> &'o [Wire<'a>] {
    fields.iter().position(|f| f.tag == tag).map(|i| occ[i].as_slice()).unwrap_or(&[])
}

fn last_varint(occ: &[Vec<Wire<'_>>], fields: &[Field], tag: u32) -> Result<Option<u64>, ProtoError> {
    match occ_of(occ, fields, tag).last() {
        None => Ok(None),
        Some(Wire::Varint(v)) => Ok(Some(*v)),
        Some(_) => Err(mismatch(tag)),
    }
}

fn last_bytes<'a>(occ: &[Vec<Wire<'a>>], fields: &[Field], tag: u32) -> Result<Option<&'a [u8]>, ProtoError> {
    match occ_of(occ, fields, tag).last() {
        None => Ok(None),
        Some(Wire::Bytes(b)) => Ok(Some(b)),
        Some(_) => Err(mismatch(tag)),
    }
}

fn mismatch(tag: u32) -> ProtoError {
    ProtoError::Malformed(format!("unexpected wire type for field {tag}"))
}

fn schema_or_null(
    fields: &[Field],
    occ: &[Vec<Wire<'_>>],
    tag: u32,
    depth: usize,
    budget: &Budget,
) -> Result<Value, ProtoError> {
    let field = by_tag(fields, tag)?;
    let found = occ_of(occ, fields, tag);
    if found.is_empty() {
        return Ok(Value::Null);
    }
    single_message(field, found, depth, budget)
}

/// Embedded JSON; a nested protobuf envelope is decoded too, so either encoding works.
fn raw_json(raw: &[u8], depth: usize, budget: &Budget) -> Result<Value, ProtoError> {
    if raw.starts_with(&super::MAGIC) {
        return super::decode_nested(raw, depth + 1, budget);
    }
    serde_json::from_slice(raw).map_err(|e| ProtoError::Malformed(format!("embedded raw object is not JSON: {e}")))
}

fn object(fields: &[Field], occ: &[Vec<Wire<'_>>], depth: usize, budget: &Budget) -> Result<Value, ProtoError> {
    let mut map = Map::new();
    for (field, found) in fields.iter().zip(occ) {
        let Some(value) = field_value(field, found, depth, budget)? else {
            continue;
        };
        budget.spend(1)?;
        if field.has(INLINE) {
            if let Value::Object(inner) = value {
                map.extend(inner);
            }
        } else {
            map.insert(field.json.to_string(), value);
        }
    }
    Ok(Value::Object(map))
}

/// The JSON for one field, or `None` when Go would leave it out.
fn field_value(field: &Field, found: &[Wire<'_>], depth: usize, budget: &Budget) -> Result<Option<Value>, ProtoError> {
    match field.rep {
        Rep::L => {
            let v = list(field, found, depth, budget)?;
            Ok(v.or_else(|| absent_collection(field)))
        }
        Rep::M => {
            let v = map(field, found, depth, budget)?;
            Ok(v.or_else(|| absent_collection(field)))
        }
        Rep::S => {
            if found.is_empty() {
                return absent_single(field, depth, budget);
            }
            if let Kind::Msg(_) = field.kind {
                return single_message(field, found, depth, budget).map(Some);
            }
            let Some(last) = found.last() else {
                return Ok(None);
            };
            let v = scalar(field.kind, field.tag, last)?;
            if !field.has(POINTER) && field.has(OMITEMPTY) && is_zero(&v) {
                return Ok(None);
            }
            Ok(Some(v))
        }
    }
}

/// A nil slice or map: dropped under omitempty, otherwise Go writes null.
pub(super) fn absent_collection(field: &Field) -> Option<Value> {
    if field.has(OMITEMPTY) {
        None
    } else {
        Some(Value::Null)
    }
}

pub(super) fn absent_single(field: &Field, depth: usize, budget: &Budget) -> Result<Option<Value>, ProtoError> {
    if field.has(POINTER) {
        return Ok(if field.has(OMITEMPTY) { None } else { Some(Value::Null) });
    }
    if let Kind::Msg(index) = field.kind {
        // A non-pointer struct is never omitted by encoding/json: write its zero value.
        return decode_message(&[], index, depth + 1, budget).map(Some);
    }
    if field.has(OMITEMPTY) {
        return Ok(None);
    }
    match field.kind {
        Kind::Msg(_) => Ok(None),
        Kind::Str => Ok(Some(Value::String(String::new()))),
        Kind::Bytes => Ok(Some(Value::Null)),
        Kind::Bool => Ok(Some(Value::Bool(false))),
        Kind::I32 | Kind::I64 => Ok(Some(Value::from(0))),
        Kind::F64 => Ok(Some(Value::from(0))),
    }
}

/// A singular message field; repeated occurrences merge, which for protobuf is concatenation.
fn single_message(field: &Field, found: &[Wire<'_>], depth: usize, budget: &Budget) -> Result<Value, ProtoError> {
    let Kind::Msg(index) = field.kind else {
        return Err(mismatch(field.tag));
    };
    let mut parts = Vec::with_capacity(found.len());
    for w in found {
        match w {
            Wire::Bytes(b) => parts.push(*b),
            _ => return Err(mismatch(field.tag)),
        }
    }
    if parts.len() == 1 {
        decode_message(parts[0], index, depth + 1, budget)
    } else {
        // The merged copy costs too: a field repeated at every level of a recursive type would
        // otherwise copy the body once per level.
        budget.spend(parts.iter().map(|p| p.len()).sum::<usize>() / 8)?;
        decode_message(&parts.concat(), index, depth + 1, budget)
    }
}

fn list(field: &Field, found: &[Wire<'_>], depth: usize, budget: &Budget) -> Result<Option<Value>, ProtoError> {
    let mut out = Vec::new();
    for w in found {
        budget.spend(1)?;
        match (field.kind, w) {
            (Kind::Msg(index), Wire::Bytes(b)) => out.push(decode_message(b, index, depth + 1, budget)?),
            (Kind::Str | Kind::Bytes, _) => out.push(scalar(field.kind, field.tag, w)?),
            // Packed numeric lists arrive as one length-delimited run of values.
            (Kind::Bool | Kind::I32 | Kind::I64, Wire::Bytes(b)) => {
                let mut r = Reader::new(b);
                while !r.is_done() {
                    budget.spend(1)?;
                    out.push(scalar(field.kind, field.tag, &Wire::Varint(r.varint()?))?);
                }
            }
            (Kind::F64, Wire::Bytes(b)) => {
                if b.len() % 8 != 0 {
                    return Err(ProtoError::Truncated);
                }
                for chunk in b.chunks_exact(8) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(chunk);
                    let w = Wire::Fixed64(u64::from_le_bytes(a));
                    out.push(scalar(field.kind, field.tag, &w)?);
                }
            }
            _ => out.push(scalar(field.kind, field.tag, w)?),
        }
    }
    Ok(if out.is_empty() { None } else { Some(Value::Array(out)) })
}

fn map(field: &Field, found: &[Wire<'_>], depth: usize, budget: &Budget) -> Result<Option<Value>, ProtoError> {
    let mut out = Map::new();
    for w in found {
        let Wire::Bytes(entry) = w else {
            return Err(mismatch(field.tag));
        };
        budget.spend(1)?;
        let mut key = String::new();
        let mut value: Option<Wire<'_>> = None;
        let mut r = Reader::new(entry);
        while let Some((tag, v)) = r.next_field()? {
            match (tag, v) {
                (1, Wire::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
                (1, _) => return Err(mismatch(field.tag)),
                (2, v) => value = Some(v),
                _ => {}
            }
        }
        let json = match (field.kind, value) {
            (Kind::Msg(index), Some(Wire::Bytes(b))) => decode_message(b, index, depth + 1, budget)?,
            (Kind::Msg(index), None) => decode_message(&[], index, depth + 1, budget)?,
            (_, Some(v)) => scalar(field.kind, field.tag, &v)?,
            (Kind::Str, None) => Value::String(String::new()),
            // A map entry without a value holds the zero value: empty bytes, false or 0.
            (Kind::Bytes, None) => Value::String(String::new()),
            (Kind::Bool, None) => Value::Bool(false),
            (_, None) => Value::from(0),
        };
        out.insert(key, json);
    }
    Ok(if out.is_empty() { None } else { Some(Value::Object(out)) })
}

fn scalar(kind: Kind, tag: u32, w: &Wire<'_>) -> Result<Value, ProtoError> {
    // Varint casts follow protobuf: int32/int64 are two's complement of the 64-bit value.
    Ok(match (kind, w) {
        (Kind::Str, Wire::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Kind::Bytes, Wire::Bytes(b)) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        (Kind::Bool, Wire::Varint(v)) => Value::Bool(*v != 0),
        (Kind::I32, Wire::Varint(v)) => Value::from(*v as i64 as i32),
        (Kind::I64, Wire::Varint(v)) => Value::from(*v as i64),
        (Kind::F64, Wire::Fixed64(v)) => float(f64::from_bits(*v))?,
        _ => return Err(mismatch(tag)),
    })
}

/// Go prints integral floats without a fraction (`5`, not `5.0`).
fn float(f: f64) -> Result<Value, ProtoError> {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        return Ok(Value::from(f as i64));
    }
    Number::from_f64(f).map(Value::Number).ok_or_else(|| ProtoError::Malformed(format!("unsupported float value {f}")))
}

pub(super) fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(_) => false,
    }
}
