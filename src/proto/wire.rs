//! Minimal protobuf wire-format reader: just enough to walk Kubernetes messages.

use super::ProtoError;

/// One field's payload as found on the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

/// Iterates over `(field number, payload)` pairs of one encoded message.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Whether every byte has been consumed.
    pub(super) fn is_done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(super) fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or(ProtoError::Truncated)?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(ProtoError::Malformed("varint overflows 64 bits".into()));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtoError::Malformed("varint longer than 10 bytes".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or(ProtoError::Truncated)?;
        let slice = self.buf.get(self.pos..end).ok_or(ProtoError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    /// The next field, or `None` at the end of the message.
    pub(super) fn next_field(&mut self) -> Result<Option<(u32, Wire<'a>)>, ProtoError> {
        if self.is_done() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| ProtoError::Malformed(format!("invalid field number in key {key}")))?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Wire::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ProtoError::Truncated)?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Wire::Fixed32(u32::from_le_bytes(a))
            }
            other => {
                // Groups (3, 4) never occur in Kubernetes messages.
                return Err(ProtoError::Malformed(format!("unsupported wire type {other} for field {number}")));
            }
        };
        Ok(Some((number, value)))
    }
}
