//! The one error type of the library, carrying the spec's exception classes.

/// The spec's exception class of an [`Error`], for matching in callers and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The spec's `RuntimeError`: a call that is not valid in the current state.
    Runtime,
    /// The spec's `ValueError`: an argument of the right type with a bad value.
    Value,
    /// The spec's `TypeError`: an argument of the wrong kind.
    Type,
    /// The spec's `NotImplementedError`: a valid request this library does not serve.
    NotImplemented,
}

/// Every failure the library reports. Messages name the offending value, op, shape or layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// See [`ErrorKind::Runtime`].
    #[error("runtime error: {0}")]
    Runtime(String),
    /// See [`ErrorKind::Value`].
    #[error("value error: {0}")]
    Value(String),
    /// See [`ErrorKind::Type`].
    #[error("type error: {0}")]
    Type(String),
    /// See [`ErrorKind::NotImplemented`].
    #[error("not implemented: {0}")]
    NotImplemented(String),
}

impl Error {
    /// The exception class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Runtime(_) => ErrorKind::Runtime,
            Error::Value(_) => ErrorKind::Value,
            Error::Type(_) => ErrorKind::Type,
            Error::NotImplemented(_) => ErrorKind::NotImplemented,
        }
    }

    /// The message without the class prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::Runtime(m) | Error::Value(m) | Error::Type(m) | Error::NotImplemented(m) => m,
        }
    }

    /// The same error with `context` put in front of its message (e.g. the op that raised it).
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        match self {
            Error::Runtime(m) => Error::Runtime(format!("{context}: {m}")),
            Error::Value(m) => Error::Value(format!("{context}: {m}")),
            Error::Type(m) => Error::Type(format!("{context}: {m}")),
            Error::NotImplemented(m) => Error::NotImplemented(format!("{context}: {m}")),
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns early with an [`Error`] of the given variant and a formatted message:
/// `bail!(Value, "extent {e} is negative")`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)+) => {
        return Err($crate::Error::$kind(format!($($arg)+)))
    };
}

/// Returns early with an [`Error`] unless the condition holds:
/// `ensure!(n > 0, Value, "need at least one element")`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)+) => {
        if !$cond {
            $crate::bail!($kind, $($arg)+);
        }
    };
}

pub(crate) use crate::{bail, ensure};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_and_context() {
        let e = Error::Value("bad extent -1".into()).context("Layout::new");
        assert_eq!(e.kind(), ErrorKind::Value);
        assert_eq!(e.message(), "Layout::new: bad extent -1");
        assert_eq!(e.to_string(), "value error: Layout::new: bad extent -1");
    }
}
