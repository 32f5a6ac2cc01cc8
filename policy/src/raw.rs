//! Serde support for the operating system's byte strings.
//!
//! Linux allows any byte but NUL in paths, arguments and environment entries, and the
//! launch request must carry them unchanged. serde's own `PathBuf`/`OsString` support
//! refuses non-UTF-8 text, so fields holding them say `#[serde(with = "crate::raw")]`
//! and travel as raw bytes. [`Raw`] covers the shapes the request uses (a string, and
//! vectors, options and pairs of them), so there is one helper, not one per shape.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// A value that travels as (a structure of) raw byte strings.
pub trait Raw: Sized {
    type Repr: Serialize + DeserializeOwned;
    fn to_repr(&self) -> Self::Repr;
    fn from_repr(repr: Self::Repr) -> Self;
}

impl Raw for OsString {
    type Repr = Vec<u8>;
    fn to_repr(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn from_repr(repr: Vec<u8>) -> Self {
        OsString::from_vec(repr)
    }
}

impl Raw for PathBuf {
    type Repr = Vec<u8>;
    fn to_repr(&self) -> Vec<u8> {
        self.as_os_str().as_bytes().to_vec()
    }
    fn from_repr(repr: Vec<u8>) -> Self {
        PathBuf::from(OsString::from_vec(repr))
    }
}

impl<T: Raw> Raw for Vec<T> {
    type Repr = Vec<T::Repr>;
    fn to_repr(&self) -> Self::Repr {
        self.iter().map(Raw::to_repr).collect()
    }
    fn from_repr(repr: Self::Repr) -> Self {
        repr.into_iter().map(T::from_repr).collect()
    }
}

impl<T: Raw> Raw for Option<T> {
    type Repr = Option<T::Repr>;
    fn to_repr(&self) -> Self::Repr {
        self.as_ref().map(Raw::to_repr)
    }
    fn from_repr(repr: Self::Repr) -> Self {
        repr.map(T::from_repr)
    }
}

impl<A: Raw, B: Raw> Raw for (A, B) {
    type Repr = (A::Repr, B::Repr);
    fn to_repr(&self) -> Self::Repr {
        (self.0.to_repr(), self.1.to_repr())
    }
    fn from_repr(repr: Self::Repr) -> Self {
        (A::from_repr(repr.0), B::from_repr(repr.1))
    }
}

pub fn serialize<T: Raw, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    value.to_repr().serialize(serializer)
}

pub fn deserialize<'de, T: Raw, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    T::Repr::deserialize(deserializer).map(T::from_repr)
}
