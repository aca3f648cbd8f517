//! hw
