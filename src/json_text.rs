//! JSON for people to read (`run --json`, `resolve --json`): indented as serde_json's pretty
//! printer does, except that an array of numbers, booleans or nulls is written on one line
//! (`"ranks": [0, 1, 2]`), so that a group of 100,000 ranks is one line and not 100,000.

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use std::io::{self, Write};

/// Writes `value` to `out` in that layout, streamed.
pub fn write(out: impl Write, value: &impl Serialize) -> serde_json::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(out, Layout::default());
    value.serialize(&mut serializer)
}

/// `value` in that layout, as a string.
pub fn to_string(value: &impl Serialize) -> String {
    let mut bytes = Vec::new();
    write(&mut bytes, value).expect("serialising to memory fails only on a failing Serialize");
    String::from_utf8(bytes).expect("serde_json writes UTF-8")
}

/// An open array or object.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    /// An array with no value yet.
    EmptyArray,
    /// An array whose first value was a number, boolean or null: its values on its line.
    InlineArray,
    /// An array whose first value was a string, array or object: one value per line.
    IndentedArray,
    /// An object, and whether it has a key yet.
    Object { keys: bool },
}

#[derive(Default)]
struct Layout {
    open: Vec<Open>,
    /// Between `begin_array_value` and the value it announced: whether that value is the first.
    pending_first: Option<bool>,
}

impl Layout {
    fn newline(&self, writer: &mut (impl Write + ?Sized)) -> io::Result<()> {
        writer.write_all(b"\n")?;
        for _ in 0..self.open.len() {
            writer.write_all(b"  ")?;
        }
        Ok(())
    }

    /// Before a value: the separator its array's layout asks for, where it is an array's.
    fn before_value(&mut self, writer: &mut (impl Write + ?Sized), scalar: bool) -> io::Result<()> {
        let Some(first) = self.pending_first.take() else {
            return Ok(());
        };
        let array = self.open.last_mut().expect("a value announced in an array");
        if *array == Open::EmptyArray {
            *array = if scalar {
                Open::InlineArray
            } else {
                Open::IndentedArray
            };
        }
        let inline = *array == Open::InlineArray;
        if !first {
            writer.write_all(b",")?;
        }
        match (inline, first) {
            (true, true) => Ok(()),
            (true, false) => writer.write_all(b" "),
            (false, _) => self.newline(writer),
        }
    }

    /// A number, boolean or null, as serde_json writes it.
    fn scalar<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        write: impl FnOnce(&mut CompactFormatter, &mut W) -> io::Result<()>,
    ) -> io::Result<()> {
        self.before_value(writer, true)?;
        write(&mut CompactFormatter, writer)
    }
}

impl Formatter for Layout {
    fn write_null<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_null(w))
    }

    fn write_bool<W: ?Sized + Write>(&mut self, writer: &mut W, value: bool) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_bool(w, value))
    }

    fn write_i8<W: ?Sized + Write>(&mut self, writer: &mut W, value: i8) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_i8(w, value))
    }

    fn write_i16<W: ?Sized + Write>(&mut self, writer: &mut W, value: i16) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_i16(w, value))
    }

    fn write_i32<W: ?Sized + Write>(&mut self, writer: &mut W, value: i32) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_i32(w, value))
    }

    fn write_i64<W: ?Sized + Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_i64(w, value))
    }

    fn write_u8<W: ?Sized + Write>(&mut self, writer: &mut W, value: u8) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_u8(w, value))
    }

    fn write_u16<W: ?Sized + Write>(&mut self, writer: &mut W, value: u16) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_u16(w, value))
    }

    fn write_u32<W: ?Sized + Write>(&mut self, writer: &mut W, value: u32) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_u32(w, value))
    }

    fn write_u64<W: ?Sized + Write>(&mut self, writer: &mut W, value: u64) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_u64(w, value))
    }

    fn write_i128<W: ?Sized + Write>(&mut self, writer: &mut W, value: i128) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_i128(w, value))
    }

    fn write_u128<W: ?Sized + Write>(&mut self, writer: &mut W, value: u128) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_u128(w, value))
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_f32(w, value))
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_f64(w, value))
    }

    fn write_number_str<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        value: &str,
    ) -> io::Result<()> {
        self.scalar(writer, |f, w| f.write_number_str(w, value))
    }

    fn begin_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.before_value(writer, false)?;
        writer.write_all(b"\"")
    }

    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.before_value(writer, false)?;
        writer.write_all(fragment.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.before_value(writer, false)?;
        self.open.push(Open::EmptyArray);
        writer.write_all(b"[")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, _: &mut W, first: bool) -> io::Result<()> {
        self.pending_first = Some(first);
        Ok(())
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.open.pop() == Some(Open::IndentedArray) {
            self.newline(writer)?;
        }
        writer.write_all(b"]")
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.before_value(writer, false)?;
        self.open.push(Open::Object { keys: false });
        writer.write_all(b"{")
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if let Some(object) = self.open.last_mut() {
            *object = Open::Object { keys: true };
        }
        if !first {
            writer.write_all(b",")?;
        }
        self.newline(writer)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.open.pop() == Some(Open::Object { keys: true }) {
            self.newline(writer)?;
        }
        writer.write_all(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arrays_of_numbers_are_one_line_and_the_rest_is_indented_as_serde_json_s() {
        let value = json!({
            "ranks": [0, 1, 2],
            "empty": [],
            "none": {},
            "names": ["a", "b\"c"],
            "pairs": [[7, 80], [8, 1.5]],
            "mixed": [null, true, {"k": [false]}],
            "groups": [{"name": "world", "ranks": [0, 1]}]
        });
        let text = to_string(&value);
        assert_eq!(
            text,
            "{\n  \"empty\": [],\n  \"groups\": [\n    {\n      \"name\": \"world\",\n      \"ranks\": [0, 1]\n    }\n  ],\n  \"mixed\": [null, true, {\n      \"k\": [false]\n    }],\n  \"names\": [\n    \"a\",\n    \"b\\\"c\"\n  ],\n  \"none\": {},\n  \"pairs\": [\n    [7, 80],\n    [8, 1.5]\n  ],\n  \"ranks\": [0, 1, 2]\n}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        // Every integer width goes through the layout (a Value holds only 64-bit ones).
        let typed = (
            vec![1u8, 2],
            vec![3u16],
            vec![4u32, 5],
            vec![-6i8],
            vec![-7i16],
            vec![-8i32],
        );
        assert_eq!(
            to_string(&typed),
            "[\n  [1, 2],\n  [3],\n  [4, 5],\n  [-6],\n  [-7],\n  [-8]\n]"
        );
        let pretty = serde_json::to_string_pretty(&json!({"a": {"b": ["x"]}, "c": []})).unwrap();
        assert_eq!(to_string(&json!({"a": {"b": ["x"]}, "c": []})), pretty);
    }
}
