//! Wire views over frame bytes: parse without copying, rewrite in place.
