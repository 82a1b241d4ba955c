//! The Wengert tape (see the tape issue): placeholder until it lands.
