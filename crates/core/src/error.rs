//! What the "kernel" answers when it refuses a change: an errno and, where Linux gives one, the extended-ack
//! message. iproute2 prints the message as `Error: <text>.` and the errno as `RTNETLINK answers: <strerror>`;
//! [`KernelError`]'s `Display` does the same so that scripts see the words they know.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// EINVAL
    Invalid,
    /// ENOENT
    NoEntry,
    /// EEXIST
    Exists,
    /// EBUSY
    Busy,
    /// ENODEV
    NoDevice,
    /// EOPNOTSUPP
    NotSupported,
    /// ENOBUFS
    NoBuffers,
    /// ERANGE
    Range,
    /// EPERM
    Perm,
    /// ENOSPC
    NoSpace,
    /// ENOSYS
    NoSys,
    /// EPROTONOSUPPORT
    ProtoNotSupported,
    /// ELOOP (a teql slave that is the master itself)
    Loop,
    /// EUNATCH (a teql master opened without slaves)
    Unattached,
}

impl Errno {
    pub fn strerror(self) -> &'static str {
        match self {
            Errno::Invalid => "Invalid argument",
            Errno::NoEntry => "No such file or directory",
            Errno::Exists => "File exists",
            Errno::Busy => "Device or resource busy",
            Errno::NoDevice => "No such device",
            Errno::NotSupported => "Operation not supported",
            Errno::NoBuffers => "No buffer space available",
            Errno::Range => "Numerical result out of range",
            Errno::Perm => "Operation not permitted",
            Errno::NoSpace => "No space left on device",
            Errno::NoSys => "Function not implemented",
            Errno::ProtoNotSupported => "Protocol not supported",
            Errno::Loop => "Too many levels of symbolic links",
            Errno::Unattached => "Protocol driver not attached",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelError {
    pub errno: Errno,
    /// The extack message, e.g. `sch_htb: tree is too deep` or `Exclusivity flag on, cannot modify`.
    pub msg: Option<String>,
}

impl KernelError {
    pub fn new(errno: Errno) -> KernelError {
        KernelError { errno, msg: None }
    }
    pub fn msg(errno: Errno, msg: impl Into<String>) -> KernelError {
        KernelError {
            errno,
            msg: Some(msg.into()),
        }
    }
    pub fn invalid(msg: impl Into<String>) -> KernelError {
        KernelError::msg(Errno::Invalid, msg)
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.msg {
            Some(m) => write!(f, "Error: {m}."),
            None => write!(f, "RTNETLINK answers: {}", self.errno.strerror()),
        }
    }
}

impl std::error::Error for KernelError {}

/// A change that was applied but deserves a remark, printed by tc as `Warning: <text>.`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning(pub String);

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Warning: {}.", self.0)
    }
}
