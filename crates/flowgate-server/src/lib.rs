//! The Flowgate server (in progress).
