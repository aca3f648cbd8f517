//! The part of Python's pickle format that holds plain data — None, bools, ints, floats, str,
//! lists, tuples, dicts — read and written without running anything: a pickle that names a
//! class or a function (`GLOBAL`, `REDUCE`, …) is refused, not executed.
//!
//! Why not the `serde-pickle` crate: its memo keeps a reference count per object, and on the
//! dumps PyTorch 2.11 writes (one string memoised and fetched many times) that count reaches
//! zero early, so that it reports "recursive structure found" for the H200 dump
//! (birkenfeld/serde-pickle#24, open).
//!
//! Reading follows CPython's unpickler: values live in an arena, the memo and the stack hold
//! their indices, so a container memoised before it was filled is seen filled when fetched.
//! The tree is built at `STOP`, within a depth of [`MAX_DEPTH`] and at most two values per
//! byte of the pickle (each value is made by an opcode or fetched by one, unless a memoised
//! container is fetched again and again: that cannot blow up memory).

use std::collections::BTreeMap;
use std::fmt;

/// Deepest nesting built (a dump nests five deep).
pub const MAX_DEPTH: usize = 64;

/// A plain Python value.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<PyValue>),
    Tuple(Vec<PyValue>),
    /// A dict's items in insertion order.
    Dict(Vec<(PyValue, PyValue)>),
}

impl PyValue {
    /// Python's name for the value's type, for errors.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "None",
            PyValue::Bool(_) => "a bool",
            PyValue::Int(_) => "an int",
            PyValue::Float(_) => "a float",
            PyValue::Str(_) => "a str",
            PyValue::List(_) => "a list",
            PyValue::Tuple(_) => "a tuple",
            PyValue::Dict(_) => "a dict",
        }
    }

    /// The member of a dict under the string key `name`.
    pub fn get(&self, name: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(items) => items
                .iter()
                .find(|(key, _)| matches!(key, PyValue::Str(k) if k == name))
                .map(|(_, value)| value),
            _ => None,
        }
    }

    pub fn str(text: &str) -> PyValue {
        PyValue::Str(text.to_string())
    }
}

/// Why bytes are not a plain-data pickle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickleError {
    /// Byte offset of the opcode at fault.
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for PickleError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

/// A value in the arena: containers hold arena indices.
enum Node {
    Leaf(PyValue),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

struct Machine<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Where the current opcode began.
    op_at: usize,
    arena: Vec<Node>,
    stack: Vec<usize>,
    marks: Vec<usize>,
    memo: BTreeMap<u32, usize>,
}

impl Machine<'_> {
    fn fail<T>(&self, message: impl Into<String>) -> Result<T, PickleError> {
        Err(PickleError {
            offset: self.op_at,
            message: message.into(),
        })
    }

    fn take(&mut self, count: usize) -> Result<&[u8], PickleError> {
        match self.at.checked_add(count) {
            Some(end) if end <= self.bytes.len() => {
                let slice = &self.bytes[self.at..end];
                self.at = end;
                Ok(slice)
            }
            _ => self.fail("the pickle ends inside an opcode's argument"),
        }
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, PickleError> {
        let b = self.take(8)?;
        let mut array = [0; 8];
        array.copy_from_slice(b);
        Ok(u64::from_le_bytes(array))
    }

    fn push(&mut self, node: Node) {
        self.arena.push(node);
        self.stack.push(self.arena.len() - 1);
    }

    fn pop(&mut self) -> Result<usize, PickleError> {
        if self
            .marks
            .last()
            .is_some_and(|&mark| mark >= self.stack.len())
        {
            return self.fail("the stack is empty above its mark");
        }
        match self.stack.pop() {
            Some(id) => Ok(id),
            None => self.fail("the stack is empty"),
        }
    }

    fn pop_mark(&mut self) -> Result<Vec<usize>, PickleError> {
        match self.marks.pop() {
            Some(mark) => Ok(self.stack.split_off(mark)),
            None => self.fail("no mark to pop to"),
        }
    }

    fn top(&self) -> Result<usize, PickleError> {
        match self.stack.last() {
            Some(&id) if self.marks.last().is_none_or(|&m| m < self.stack.len()) => Ok(id),
            _ => self.fail("the stack is empty"),
        }
    }

    fn string(&mut self, length: usize) -> Result<(), PickleError> {
        let raw = self.take(length)?.to_vec();
        match String::from_utf8(raw) {
            Ok(text) => {
                self.push(Node::Leaf(PyValue::Str(text)));
                Ok(())
            }
            Err(_) => self.fail("a str that is not UTF-8"),
        }
    }

    /// A text argument up to its newline (protocols 0 and 1's `INT` and `LONG`).
    fn line(&mut self) -> Result<String, PickleError> {
        let Some(length) = self.bytes[self.at..].iter().position(|&b| b == b'\n') else {
            return self.fail("the pickle ends inside an opcode's argument");
        };
        let raw = self.take(length + 1)?;
        match std::str::from_utf8(&raw[..length]) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => self.fail("a number that is not text"),
        }
    }

    /// `INT`'s text: `01` and `00` are protocol 1's True and False, else a decimal int.
    fn text_int(&mut self) -> Result<(), PickleError> {
        let text = self.line()?;
        match text.as_str() {
            "01" => self.push(Node::Leaf(PyValue::Bool(true))),
            "00" => self.push(Node::Leaf(PyValue::Bool(false))),
            digits => return self.push_decimal("INT", digits),
        }
        Ok(())
    }

    /// `LONG`'s text: a decimal int with a trailing `L`.
    fn text_long(&mut self) -> Result<(), PickleError> {
        let text = self.line()?;
        self.push_decimal("LONG", text.strip_suffix('L').unwrap_or(&text))
    }

    /// The int of `opcode`'s decimal text.
    fn push_decimal(&mut self, opcode: &str, digits: &str) -> Result<(), PickleError> {
        match digits.parse::<i64>() {
            Ok(n) => {
                self.push(Node::Leaf(PyValue::Int(n)));
                Ok(())
            }
            Err(_) => self.fail(format!("{opcode} {digits:?} is not an int of 64 bits")),
        }
    }

    fn long(&mut self, length: usize) -> Result<(), PickleError> {
        if length > 8 {
            return self.fail(format!("an int of {length} bytes: too large"));
        }
        let raw = self.take(length)?;
        let negative = raw.last().is_some_and(|b| b & 0x80 != 0);
        let mut array = [if negative { 0xff } else { 0 }; 8];
        array[..raw.len()].copy_from_slice(raw);
        self.push(Node::Leaf(PyValue::Int(i64::from_le_bytes(array))));
        Ok(())
    }

    fn append(&mut self, items: Vec<usize>) -> Result<(), PickleError> {
        let list = self.top()?;
        match &mut self.arena[list] {
            Node::List(members) => {
                members.extend(items);
                Ok(())
            }
            _ => self.fail("APPEND(S) on something that is not a list"),
        }
    }

    fn set_items(&mut self, items: Vec<usize>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return self.fail("SETITEMS with a key and no value");
        }
        let dict = self.top()?;
        match &mut self.arena[dict] {
            Node::Dict(members) => {
                for pair in items.chunks(2) {
                    members.push((pair[0], pair[1]));
                }
                Ok(())
            }
            _ => self.fail("SETITEM(S) on something that is not a dict"),
        }
    }

    fn memoize(&mut self, key: u32) -> Result<(), PickleError> {
        let id = self.top()?;
        self.memo.insert(key, id);
        Ok(())
    }

    fn fetch(&mut self, key: u32) -> Result<(), PickleError> {
        match self.memo.get(&key) {
            Some(&id) => {
                self.stack.push(id);
                Ok(())
            }
            None => self.fail(format!("memo {key} was never stored")),
        }
    }

    /// One opcode; `Some(value)` at `STOP`.
    fn step(&mut self) -> Result<Option<usize>, PickleError> {
        self.op_at = self.at;
        let op = self.u8()?;
        match op {
            0x80 => {
                let protocol = self.u8()?;
                if protocol > 5 {
                    return self.fail(format!("pickle protocol {protocol} (Python knows 0 to 5)"));
                }
            }
            0x95 => {
                self.u64()?;
            }
            b'.' => {
                let value = self.pop()?;
                return Ok(Some(value));
            }
            b'(' => self.marks.push(self.stack.len()),
            b'}' => self.push(Node::Dict(Vec::new())),
            b']' => self.push(Node::List(Vec::new())),
            b')' => self.push(Node::Tuple(Vec::new())),
            b'N' => self.push(Node::Leaf(PyValue::None)),
            0x88 => self.push(Node::Leaf(PyValue::Bool(true))),
            0x89 => self.push(Node::Leaf(PyValue::Bool(false))),
            b'K' => {
                let n = self.u8()?;
                self.push(Node::Leaf(PyValue::Int(i64::from(n))));
            }
            b'M' => {
                let b = self.take(2)?;
                let n = u16::from_le_bytes([b[0], b[1]]);
                self.push(Node::Leaf(PyValue::Int(i64::from(n))));
            }
            b'J' => {
                let n = self.u32()? as i32;
                self.push(Node::Leaf(PyValue::Int(i64::from(n))));
            }
            b'I' => self.text_int()?,
            b'L' => self.text_long()?,
            0x8a => {
                let length = usize::from(self.u8()?);
                self.long(length)?;
            }
            0x8b => {
                let length = self.u32()? as usize;
                self.long(length)?;
            }
            b'G' => {
                let b = self.take(8)?;
                let mut array = [0; 8];
                array.copy_from_slice(b);
                self.push(Node::Leaf(PyValue::Float(f64::from_be_bytes(array))));
            }
            b'X' => {
                let length = self.u32()? as usize;
                self.string(length)?;
            }
            0x8c => {
                let length = usize::from(self.u8()?);
                self.string(length)?;
            }
            0x8d => {
                let length = usize::try_from(self.u64()?).unwrap_or(usize::MAX);
                self.string(length)?;
            }
            0x85..=0x87 => {
                let count = usize::from(op - 0x84);
                if self.stack.len() < count
                    || self
                        .marks
                        .last()
                        .is_some_and(|&m| m + count > self.stack.len())
                {
                    return self.fail("a tuple of more items than the stack holds");
                }
                let items = self.stack.split_off(self.stack.len() - count);
                self.push(Node::Tuple(items));
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push(Node::Tuple(items));
            }
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Node::List(items));
            }
            b'd' => {
                let items = self.pop_mark()?;
                self.push(Node::Dict(Vec::new()));
                self.set_items(items)?;
            }
            b'a' => {
                let item = self.pop()?;
                self.append(vec![item])?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.append(items)?;
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.set_items(vec![key, value])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.set_items(items)?;
            }
            b'q' => {
                let key = u32::from(self.u8()?);
                self.memoize(key)?;
            }
            b'r' => {
                let key = self.u32()?;
                self.memoize(key)?;
            }
            0x94 => {
                let key = self.memo.len() as u32;
                self.memoize(key)?;
            }
            b'h' => {
                let key = u32::from(self.u8()?);
                self.fetch(key)?;
            }
            b'j' => {
                let key = self.u32()?;
                self.fetch(key)?;
            }
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let top = self.top()?;
                self.stack.push(top);
            }
            b'c' | 0x93 | b'R' | 0x81 | 0x92 | b'b' | b'i' | b'o' => {
                return self.fail(format!(
                    "opcode {:?} builds an object of a class: refused (a Flight Recorder dump holds only dicts, lists, strings and numbers)",
                    char::from(op)
                ));
            }
            other => {
                return self.fail(format!(
                    "opcode 0x{other:02x} is not one of plain data's (None, bool, int, float, str, list, tuple, dict)"
                ));
            }
        }
        Ok(None)
    }

    /// The value at `id`; `path` holds the containers being built around it.
    fn build(
        &self,
        id: usize,
        path: &mut Vec<usize>,
        nodes: &mut usize,
    ) -> Result<PyValue, PickleError> {
        *nodes += 1;
        let fail = |message: &str| PickleError {
            offset: self.bytes.len(),
            message: message.to_string(),
        };
        if path.contains(&id) {
            return Err(fail("a container contains itself"));
        }
        if path.len() >= MAX_DEPTH {
            return Err(fail(&format!("values nest deeper than {MAX_DEPTH}")));
        }
        if *nodes > 2 * self.bytes.len() {
            return Err(fail(
                "more values than two per byte: a memoised container fetched again and again",
            ));
        }
        path.push(id);
        let mut build_all = |ids: &[usize], nodes: &mut usize| {
            ids.iter()
                .map(|&member| self.build(member, path, nodes))
                .collect::<Result<Vec<PyValue>, PickleError>>()
        };
        let value = match &self.arena[id] {
            Node::Leaf(value) => value.clone(),
            Node::List(ids) => PyValue::List(build_all(ids, nodes)?),
            Node::Tuple(ids) => PyValue::Tuple(build_all(ids, nodes)?),
            Node::Dict(pairs) => {
                let flat: Vec<usize> = pairs.iter().flat_map(|&(k, v)| [k, v]).collect();
                let mut built = build_all(&flat, nodes)?.into_iter();
                let mut items = Vec::with_capacity(pairs.len());
                while let (Some(key), Some(value)) = (built.next(), built.next()) {
                    items.push((key, value));
                }
                PyValue::Dict(items)
            }
        };
        path.pop();
        Ok(value)
    }
}

/// Reads one pickle of plain data; bytes after its `STOP` are an error.
pub fn read(bytes: &[u8]) -> Result<PyValue, PickleError> {
    let mut machine = Machine {
        bytes,
        at: 0,
        op_at: 0,
        arena: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: BTreeMap::new(),
    };
    loop {
        if machine.at >= bytes.len() {
            machine.op_at = machine.at;
            return machine.fail("the pickle ends before its STOP");
        }
        if let Some(top) = machine.step()? {
            if machine.at != bytes.len() {
                machine.op_at = machine.at;
                return machine.fail("bytes follow the pickle's STOP");
            }
            return machine.build(top, &mut Vec::new(), &mut 0);
        }
    }
}

fn write_value(value: &PyValue, out: &mut Vec<u8>) {
    match value {
        PyValue::None => out.push(b'N'),
        PyValue::Bool(true) => out.push(0x88),
        PyValue::Bool(false) => out.push(0x89),
        PyValue::Int(n) => match *n {
            0..=0xff => out.extend([b'K', *n as u8]),
            0x100..=0xffff => {
                out.push(b'M');
                out.extend((*n as u16).to_le_bytes());
            }
            _ if i32::try_from(*n).is_ok() => {
                out.push(b'J');
                out.extend((*n as i32).to_le_bytes());
            }
            _ => {
                out.extend([0x8a, 8]);
                out.extend(n.to_le_bytes());
            }
        },
        PyValue::Float(x) => {
            out.push(b'G');
            out.extend(x.to_be_bytes());
        }
        PyValue::Str(text) => {
            out.push(b'X');
            out.extend((text.len() as u32).to_le_bytes());
            out.extend(text.as_bytes());
        }
        PyValue::List(items) => {
            out.push(b']');
            if !items.is_empty() {
                out.push(b'(');
                for item in items {
                    write_value(item, out);
                }
                out.push(b'e');
            }
        }
        PyValue::Tuple(items) => {
            out.push(b'(');
            for item in items {
                write_value(item, out);
            }
            out.push(b't');
        }
        PyValue::Dict(items) => {
            out.push(b'}');
            if !items.is_empty() {
                out.push(b'(');
                for (key, item) in items {
                    write_value(key, out);
                    write_value(item, out);
                }
                out.push(b'u');
            }
        }
    }
}

/// The value as a protocol-2 pickle (what PyTorch's dumps are), without memo.
pub fn write(value: &PyValue) -> Vec<u8> {
    let mut out = vec![0x80, 2];
    write_value(value, &mut out);
    out.push(b'.');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memoised_container_is_seen_filled_when_fetched() {
        // [d, d] where d = {} is memoised empty, then filled: CPython reads [{'a': 1}] twice.
        let bytes = b"\x80\x02](}q\x00X\x01\x00\x00\x00aK\x01sh\x00e.";
        let one = PyValue::Dict(vec![(PyValue::str("a"), PyValue::Int(1))]);
        assert_eq!(read(bytes).unwrap(), PyValue::List(vec![one.clone(), one]));
    }

    #[test]
    fn protocol_1_s_text_ints_and_bools_are_read() {
        // pickle.dumps({'a': True, 'b': 2**40, 'c': [1.5, None], 'd': False}, protocol=1)
        let bytes = b"}q\x00(X\x01\x00\x00\x00aq\x01I01\nX\x01\x00\x00\x00bq\x02L1099511627776L\nX\x01\x00\x00\x00cq\x03]q\x04(G?\xf8\x00\x00\x00\x00\x00\x00NeX\x01\x00\x00\x00dq\x05I00\nu.";
        let value = read(bytes).unwrap();
        assert_eq!(value.get("a"), Some(&PyValue::Bool(true)));
        assert_eq!(value.get("b"), Some(&PyValue::Int(1 << 40)));
        assert_eq!(
            value.get("c"),
            Some(&PyValue::List(vec![PyValue::Float(1.5), PyValue::None]))
        );
        assert_eq!(value.get("d"), Some(&PyValue::Bool(false)));
        assert_eq!(read(b"I-7\n.").unwrap(), PyValue::Int(-7));
        let huge = read(b"L123456789012345678901234567890L\n.").unwrap_err();
        assert!(huge.message.contains("not an int of 64 bits"), "{huge}");
        let unended = read(b"I01").unwrap_err();
        assert!(unended.message.contains("ends inside"), "{unended}");
    }

    #[test]
    fn what_it_writes_it_reads() {
        let value = PyValue::Dict(vec![
            (PyValue::str("n"), PyValue::Int(-5)),
            (PyValue::str("big"), PyValue::Int(1_796_157_042_820_692_223)),
            (PyValue::str("neg"), PyValue::Int(-1 << 40)),
            (PyValue::str("f"), PyValue::Float(1.5)),
            (
                PyValue::str("t"),
                PyValue::Tuple(vec![PyValue::None, PyValue::Bool(true)]),
            ),
            (PyValue::str("l"), PyValue::List(vec![])),
            (PyValue::str("w"), PyValue::Int(300)),
            (PyValue::str("ü"), PyValue::Int(70_000)),
        ]);
        assert_eq!(read(&write(&value)).unwrap(), value);
    }

    #[test]
    fn code_truncation_cycles_and_blow_ups_are_errors_not_crashes() {
        let global = read(b"\x80\x02cos\nsystem\n.").unwrap_err();
        assert!(global.message.contains("refused"), "{global}");
        assert_eq!(global.offset, 2);
        let truncated = read(b"\x80\x02X\x09\x00\x00\x00abc").unwrap_err();
        assert!(truncated.message.contains("ends inside"), "{truncated}");
        // A list that contains itself.
        let cycle = read(b"\x80\x02]q\x00h\x00a.").unwrap_err();
        assert!(cycle.message.contains("contains itself"), "{cycle}");
        // Each list holds the previous one twice: 2^40 values if built naively.
        let mut bomb = b"\x80\x02]q\x00".to_vec();
        for key in 1..=40u8 {
            bomb.extend([b']', b'(', b'h', key - 1, b'h', key - 1, b'e', b'q', key]);
        }
        bomb.push(b'.');
        let message = read(&bomb).unwrap_err().message;
        assert!(message.contains("fetched again and again"), "{message}");
        let trailing = read(b"\x80\x02N.N").unwrap_err();
        assert!(trailing.message.contains("follow"), "{trailing}");
        assert!(read(b"").is_err());
        assert!(read(b"\x80\x02e.").is_err());
    }
}
