//! The conversion between k8s-pb messages and kube's JSON, in both directions: the traits,
//! the field modes of Go's json tags and the scalar types with their own JSON form (times,
//! bytes, IntOrString, Quantity, fieldsV1). The per-message tables are in `messages.rs`.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::authentication::v1 as authnv1;
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// A value that cannot be converted (a time outside Go's range, fieldsV1 that is not JSON, a
/// JSON field of the wrong type), with the field path where it was found.
#[derive(Debug)]
pub(super) struct ConvError {
    path: String,
    message: String,
}

impl ConvError {
    pub(super) fn new(message: impl Into<String>) -> Self {
        ConvError {
            path: String::new(),
            message: message.into(),
        }
    }

    /// Prefixes the path with the enclosing field name or `[index]`.
    pub(super) fn within(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() || self.path.starts_with('[') {
            format!("{segment}{}", self.path)
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

impl std::fmt::Display for ConvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

pub(super) type Conv = Result<Value, ConvError>;

/// A k8s-pb message or scalar as JSON. `Default` gives Go's zero value for fields that are
/// written even when absent.
pub(super) trait ToJson: Default {
    /// `Value::Null` means "leave the field out".
    fn to_json(&self) -> Conv;

    /// Whether `omitempty` drops it. Go never drops structs, so messages say no.
    fn is_zero(&self) -> bool {
        false
    }
}

/// A field of a k8s-pb message: `Option<T>`, `Vec<T>` or a map.
pub(super) trait Field {
    /// The JSON, or `None` when the field is absent from the message.
    fn value(&self) -> Option<Conv>;
    fn is_zero(&self) -> bool;
    /// The JSON, with Go's zero value when absent.
    fn required(&self) -> Conv;
}

impl<T: ToJson> Field for Option<T> {
    fn value(&self) -> Option<Conv> {
        self.as_ref().map(ToJson::to_json)
    }
    fn is_zero(&self) -> bool {
        self.as_ref().is_none_or(ToJson::is_zero)
    }
    fn required(&self) -> Conv {
        match self {
            Some(v) => v.to_json(),
            None => T::default().to_json(),
        }
    }
}

impl<T: ToJson> Field for Vec<T> {
    fn value(&self) -> Option<Conv> {
        Some(self.required())
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn required(&self) -> Conv {
        self.iter()
            .enumerate()
            .map(|(i, v)| v.to_json().map_err(|e| e.within(&format!("[{i}]"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
}

impl<T: ToJson> Field for BTreeMap<String, T> {
    fn value(&self) -> Option<Conv> {
        Some(self.required())
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn required(&self) -> Conv {
        let mut map = Map::new();
        for (k, v) in self {
            let v = v.to_json().map_err(|e| e.within(&format!("[{k}]")))?;
            map.insert(k.clone(), v);
        }
        Ok(Value::Object(map))
    }
}

/// Builds a JSON object field by field; keeps the first error.
#[derive(Default)]
pub(super) struct Obj {
    map: Map<String, Value>,
    err: Option<ConvError>,
}

impl Obj {
    fn put(mut self, key: &str, value: Option<Conv>) -> Self {
        if self.err.is_some() {
            return self;
        }
        match value {
            None | Some(Ok(Value::Null)) => {}
            Some(Ok(v)) => {
                self.map.insert(key.to_string(), v);
            }
            Some(Err(e)) => self.err = Some(e.within(key)),
        }
        self
    }

    /// A Go value field tagged `omitempty`.
    pub(super) fn omit(self, key: &str, field: &impl Field) -> Self {
        let value = if field.is_zero() { None } else { field.value() };
        self.put(key, value)
    }

    /// A Go pointer field: written whenever present, zero included.
    pub(super) fn ptr(self, key: &str, field: &impl Field) -> Self {
        self.put(key, field.value())
    }

    /// A Go field without `omitempty`: always written.
    pub(super) fn req(self, key: &str, field: &impl Field) -> Self {
        self.put(key, Some(field.required()))
    }

    pub(super) fn done(self) -> Conv {
        match self.err {
            Some(e) => Err(e),
            None => Ok(Value::Object(self.map)),
        }
    }
}

/// A k8s-pb message or scalar from JSON: the inverse of [`ToJson`].
pub(super) trait FromJson: Sized {
    /// `Value::Null` stands for a field the JSON leaves out (or sets to `null`) and gives Go's
    /// zero value, which Go's generated code then writes like any other value: the empty
    /// string, 0, false, an empty `Time` message, a message with its own zero fields.
    fn from_json(value: &Value) -> Result<Self, ConvError>;
}

/// The error for a JSON value of the wrong type, naming what was expected.
pub(super) fn mismatch(expected: &str, got: &Value) -> ConvError {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    ConvError::new(format!("expected {expected}, got {got}"))
}

/// A field of a k8s-pb message from its JSON (`None`: the key is absent): the inverse of
/// [`Field`].
pub(super) trait FieldFrom: Sized {
    /// A Go value field (`omit`, `req`): absent or null is Go's zero value, which Go writes.
    fn value(json: Option<&Value>) -> Result<Self, ConvError>;
    /// A Go pointer field: absent or null is nil, which Go does not write. Lists and maps
    /// are the same either way (nil and empty both write nothing).
    fn pointer(json: Option<&Value>) -> Result<Self, ConvError> {
        Self::value(json)
    }
}

impl<T: FromJson> FieldFrom for Option<T> {
    fn value(json: Option<&Value>) -> Result<Self, ConvError> {
        T::from_json(json.unwrap_or(&Value::Null)).map(Some)
    }
    fn pointer(json: Option<&Value>) -> Result<Self, ConvError> {
        match json {
            None | Some(Value::Null) => Ok(None),
            Some(v) => T::from_json(v).map(Some),
        }
    }
}

impl<T: FromJson> FieldFrom for Vec<T> {
    fn value(json: Option<&Value>) -> Result<Self, ConvError> {
        match json {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| T::from_json(v).map_err(|e| e.within(&format!("[{i}]"))))
                .collect(),
            Some(other) => Err(mismatch("an array", other)),
        }
    }
}

impl<T: FromJson> FieldFrom for BTreeMap<String, T> {
    fn value(json: Option<&Value>) -> Result<Self, ConvError> {
        match json {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(k, v)| {
                    T::from_json(v)
                        .map(|v| (k.clone(), v))
                        .map_err(|e| e.within(&format!("[{k}]")))
                })
                .collect(),
            Some(other) => Err(mismatch("an object", other)),
        }
    }
}

/// Reads a JSON object field by field, the inverse of [`Obj`]: the same mode names, so one
/// table line gives both directions. Keys the message has no field for (`apiVersion`, `kind`,
/// fields newer than k8s-pb) are not looked at, as Go's protobuf code has nowhere to put them.
pub(super) struct Fields<'a>(Option<&'a Map<String, Value>>);

impl<'a> Fields<'a> {
    /// `null` reads as an object without keys: the message of Go zero values.
    pub(super) fn of(value: &'a Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(Fields(None)),
            Value::Object(map) => Ok(Fields(Some(map))),
            other => Err(mismatch("an object", other)),
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.and_then(|map| map.get(key))
    }

    /// A Go value field tagged `omitempty`: written by Go's protobuf code even when zero.
    pub(super) fn omit<F: FieldFrom>(&self, key: &str) -> Result<F, ConvError> {
        F::value(self.get(key)).map_err(|e| e.within(key))
    }

    /// A Go pointer field: only written when set.
    pub(super) fn ptr<F: FieldFrom>(&self, key: &str) -> Result<F, ConvError> {
        F::pointer(self.get(key)).map_err(|e| e.within(key))
    }

    /// A Go field without `omitempty`: written like `omit`; the tag only matters for JSON.
    pub(super) fn req<F: FieldFrom>(&self, key: &str) -> Result<F, ConvError> {
        self.omit(key)
    }
}

impl ToJson for String {
    fn to_json(&self) -> Conv {
        Ok(Value::String(self.clone()))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl FromJson for String {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.clone()),
            other => Err(mismatch("a string", other)),
        }
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Conv {
        Ok(Value::Bool(*self))
    }
    fn is_zero(&self) -> bool {
        !*self
    }
}

impl FromJson for bool {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(false),
            Value::Bool(b) => Ok(*b),
            other => Err(mismatch("a boolean", other)),
        }
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Conv {
        Ok(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

/// Like Go's encoding/json, only integral numbers in range: `1.0` is not an int32.
impl FromJson for i32 {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        let wide = i64::from_json(value)?;
        i32::try_from(wide)
            .map_err(|_| ConvError::new(format!("{wide} does not fit in a 32-bit integer")))
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Conv {
        Ok(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

impl FromJson for i64 {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(0),
            Value::Number(n) => n
                .as_i64()
                .ok_or_else(|| ConvError::new(format!("{n} is not a 64-bit integer"))),
            other => Err(mismatch("an integer", other)),
        }
    }
}

/// `float64` (a schema's `maximum`, `minimum`, `multipleOf`), as Go's encoding/json writes it:
/// an integral value without a fraction (`1`, not `1.0`).
impl ToJson for f64 {
    fn to_json(&self) -> Conv {
        if !self.is_finite() {
            return Err(ConvError::new(format!("{self} is not a JSON number")));
        }
        // Integral values within i64 go out as integers; the cast is exact there.
        const I64_RANGE: f64 = 9_223_372_036_854_775_808.0;
        if self.fract() == 0.0 && self.abs() < I64_RANGE {
            #[allow(clippy::cast_possible_truncation)]
            return Ok(Value::from(*self as i64));
        }
        Ok(Value::from(*self))
    }
    fn is_zero(&self) -> bool {
        *self == 0.0
    }
}

impl FromJson for f64 {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(0.0),
            Value::Number(n) => n
                .as_f64()
                .ok_or_else(|| ConvError::new(format!("{n} is not a 64-bit float"))),
            other => Err(mismatch("a number", other)),
        }
    }
}

/// A message k8s-pb boxes (a recursive schema's `not`, `items`, `additionalProperties`): as
/// the message itself.
impl<T: ToJson> ToJson for Box<T> {
    fn to_json(&self) -> Conv {
        self.as_ref().to_json()
    }
    fn is_zero(&self) -> bool {
        self.as_ref().is_zero()
    }
}

impl<T: FromJson> FromJson for Box<T> {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        T::from_json(value).map(Box::new)
    }
}

/// `[]byte`: standard base64 with padding, as Go's encoding/json writes it.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Conv {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl FromJson for Vec<u8> {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        match value {
            Value::Null => Ok(Vec::new()),
            Value::String(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| ConvError::new(format!("not standard base64: {e}"))),
            other => Err(mismatch("a base64 string", other)),
        }
    }
}

/// Go's zero `time.Time` as Unix seconds (0001-01-01T00:00:00Z).
pub(super) const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// `metav1.Time` (`micro == false`, whole seconds) or `metav1.MicroTime` as RFC 3339 in UTC.
fn timestamp(seconds: Option<i64>, nanos: Option<i32>, micro: bool) -> Conv {
    // Go writes the zero time as an empty message, and its JSON is null: leave it out.
    if seconds.is_none() && nanos.is_none() {
        return Ok(Value::Null);
    }
    let (seconds, nanos) = (seconds.unwrap_or(0), nanos.unwrap_or(0));
    if seconds == GO_ZERO_TIME_UNIX && nanos == 0 {
        return Ok(Value::Null);
    }
    // Go's time.Unix accepts nanos outside [0, 1e9) and carries them into the seconds.
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let secs = i64::try_from(total.div_euclid(1_000_000_000));
    let subsec = u32::try_from(total.rem_euclid(1_000_000_000));
    let time = match (secs, subsec) {
        (Ok(s), Ok(n)) => chrono::DateTime::from_timestamp(s, n),
        _ => None,
    };
    let Some(time) = time else {
        return Err(ConvError::new(format!(
            "time {seconds}s {nanos}ns is out of range"
        )));
    };
    // Go's Time.MarshalJSON refuses years it cannot write in four digits.
    if !(0..=9999).contains(&chrono::Datelike::year(&time)) {
        return Err(ConvError::new("year outside of range [0,9999]"));
    }
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Value::String(time.format(format).to_string()))
}

/// The inverse of [`timestamp`]: `(seconds, nanos)` as Go's `Time.Marshal` /
/// `MicroTime.Marshal` write them.
///
/// The zero time (null or absent in JSON) is an empty message, since Go marshals a zero time
/// to no bytes. Otherwise both fields are written, as Go's `Timestamp` has no pointers:
/// `Time` with nanos 0 (it keeps whole seconds only, like its JSON), `MicroTime` with the
/// nanoseconds cut to microseconds.
fn timestamp_from(value: &Value, micro: bool) -> Result<(Option<i64>, Option<i32>), ConvError> {
    let text = match value {
        Value::Null => return Ok((None, None)),
        Value::String(text) => text,
        other => return Err(mismatch("an RFC 3339 time", other)),
    };
    let time = chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|e| ConvError::new(format!("time {text:?} is not RFC 3339: {e}")))?;
    let seconds = time.timestamp();
    let subsec = time.timestamp_subsec_nanos();
    if seconds == GO_ZERO_TIME_UNIX && subsec == 0 {
        return Ok((None, None));
    }
    let nanos = if micro { subsec - subsec % 1_000 } else { 0 };
    // Below 1e9, so it always fits; the error is only there to avoid a cast.
    let nanos = i32::try_from(nanos).map_err(|_| ConvError::new("nanoseconds out of range"))?;
    Ok((Some(seconds), Some(nanos)))
}

impl ToJson for metav1::Time {
    fn to_json(&self) -> Conv {
        timestamp(self.seconds, self.nanos, false)
    }
}

impl FromJson for metav1::Time {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        let (seconds, nanos) = timestamp_from(value, false)?;
        Ok(metav1::Time { seconds, nanos })
    }
}

impl ToJson for metav1::MicroTime {
    fn to_json(&self) -> Conv {
        timestamp(self.seconds, self.nanos, true)
    }
}

impl FromJson for metav1::MicroTime {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        let (seconds, nanos) = timestamp_from(value, true)?;
        Ok(metav1::MicroTime { seconds, nanos })
    }
}

/// `fieldsV1` holds JSON bytes (the managed-fields set) that kube embeds verbatim.
impl ToJson for metav1::FieldsV1 {
    fn to_json(&self) -> Conv {
        match &self.raw {
            None => Ok(Value::Null),
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| ConvError::new(format!("fieldsV1 is not valid JSON: {e}"))),
        }
    }
}

/// Go keeps the JSON bytes it was given; ours are the compact form in the stored key order.
impl FromJson for metav1::FieldsV1 {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        if value.is_null() {
            return Ok(metav1::FieldsV1 { raw: None });
        }
        let raw = serde_json::to_vec(value)
            .map_err(|e| ConvError::new(format!("fieldsV1 cannot be written as JSON: {e}")))?;
        Ok(metav1::FieldsV1 { raw: Some(raw) })
    }
}

impl ToJson for IntOrString {
    fn to_json(&self) -> Conv {
        match self.r#type.unwrap_or(0) {
            0 => Ok(Value::from(self.int_val.unwrap_or(0))),
            1 => Ok(Value::String(self.str_val.clone().unwrap_or_default())),
            t => Err(ConvError::new(format!("impossible IntOrString.Type {t}"))),
        }
    }
    /// Go writes a zero `targetPort` as `0`; kube defaults 0 and "" to the port, so leaving
    /// it out gives a registry the unset value its defaulting looks for.
    fn is_zero(&self) -> bool {
        match self.r#type.unwrap_or(0) {
            0 => self.int_val.unwrap_or(0) == 0,
            1 => self.str_val.as_deref().unwrap_or("").is_empty(),
            _ => false,
        }
    }
}

/// Go's `IntOrString` is a struct of three value fields, all written: type 0 with the int
/// (null: Go's zero, the int 0) or type 1 with the string.
impl FromJson for IntOrString {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        let (kind, int, string) = match value {
            Value::String(s) => (1, 0, s.clone()),
            Value::Null | Value::Number(_) => (0, i32::from_json(value)?, String::new()),
            other => return Err(mismatch("an integer or a string", other)),
        };
        Ok(IntOrString {
            r#type: Some(kind),
            int_val: Some(int),
            str_val: Some(string),
        })
    }
}

impl ToJson for Quantity {
    fn to_json(&self) -> Conv {
        Ok(Value::String(
            self.string.clone().unwrap_or_else(|| "0".to_string()),
        ))
    }
    fn is_zero(&self) -> bool {
        self.string.as_deref().unwrap_or("").is_empty()
    }
}

/// Go writes a Quantity as its canonical string, "0" for the zero one. The string is passed
/// through as stored (kube canonicalizes on the way in; this does not re-canonicalize), and a
/// JSON number, which Go's Quantity also accepts, is written in its JSON form.
impl FromJson for Quantity {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        let string = match value {
            Value::Null => "0".to_string(),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => return Err(mismatch("a quantity string", other)),
        };
        Ok(Quantity {
            string: Some(string),
        })
    }
}

/// `ExtraValue` is a Go `[]string`: a JSON array, not an object.
impl ToJson for authnv1::ExtraValue {
    fn to_json(&self) -> Conv {
        self.items.required()
    }
}

impl FromJson for authnv1::ExtraValue {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        Ok(authnv1::ExtraValue {
            items: FieldFrom::value(Some(value))?,
        })
    }
}

impl ToJson for authzv1::ExtraValue {
    fn to_json(&self) -> Conv {
        self.items.required()
    }
}

impl FromJson for authzv1::ExtraValue {
    fn from_json(value: &Value) -> Result<Self, ConvError> {
        Ok(authzv1::ExtraValue {
            items: FieldFrom::value(Some(value))?,
        })
    }
}
