//! GGUF metadata values: every scalar type, strings and (nested) arrays.

use serde::Serialize;

/// GGUF metadata value type ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    /// Smallest encoded size of one value of this type (used to bound array counts).
    pub fn min_size(self) -> usize {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Element type (for empty arrays and the writer) and the values.
    Array(#[serde(skip)] ValueType, Vec<MetaValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array(..) => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// Any integer type (or bool) as i64.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            MetaValue::U8(v) => v as i64,
            MetaValue::I8(v) => v as i64,
            MetaValue::U16(v) => v as i64,
            MetaValue::I16(v) => v as i64,
            MetaValue::U32(v) => v as i64,
            MetaValue::I32(v) => v as i64,
            MetaValue::U64(v) => i64::try_from(v).ok()?,
            MetaValue::I64(v) => v,
            MetaValue::Bool(v) => v as i64,
            _ => return None,
        })
    }

    /// A non-negative integer that fits in u32.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_i64().and_then(|v| u32::try_from(v).ok())
    }

    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U64(v) => Some(v),
            _ => self.as_i64().and_then(|v| u64::try_from(v).ok()),
        }
    }

    /// Any numeric type as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_f32(&self) -> Option<f32> {
        self.as_f64().map(|v| v as f32)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(_, v) => Some(v),
            _ => None,
        }
    }

    /// Short display for listings: arrays are summarised, long strings cut.
    pub fn summary(&self) -> String {
        match self {
            MetaValue::String(s) if s.chars().count() > 80 => {
                format!("{:?}… ({} chars)", s.chars().take(60).collect::<String>(), s.chars().count())
            }
            MetaValue::String(s) => format!("{s:?}"),
            MetaValue::Array(t, v) if v.len() > 8 => {
                let head: Vec<String> = v.iter().take(4).map(|x| x.summary()).collect();
                format!("[{}, …] ({} × {:?})", head.join(", "), v.len(), t)
            }
            MetaValue::Array(_, v) => {
                format!("[{}]", v.iter().map(|x| x.summary()).collect::<Vec<_>>().join(", "))
            }
            other => serde_json::to_string(other).unwrap_or_default(),
        }
    }
}
