//! The realms of a host's routes: the part of its FIB (forwarding information base) traffic control
//! reads. `ip route add PREFIX … realm R` gives a route an `nh_tclassid` (`RTA_FLOW`), which routing
//! copies into the packet's `dst->tclassid`, where the route classifier and `meta(rt_classid)` read it.
//! Paths are the driver's (the simulator's fewest hops); this table holds only the realms, keyed by
//! prefix as `fib_table_insert` keys a route, looked up most specific first as `fib_table_lookup`.

/// One route's realms: the prefix it covers and its `nh_tclassid` (destination realm in the low 16 bits,
/// a `realms FROM/TO` source realm in the high 16), with the gateway and device it named (checked by a
/// driver that knows the paths).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RealmRoute {
    pub prefix: u32,
    pub len: u8,
    pub tclassid: u32,
    pub via: Option<u32>,
    pub dev: Option<String>,
}

impl RealmRoute {
    pub fn covers(&self, addr: u32) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.len as u32).unwrap_or(0);
        (addr ^ self.prefix) & mask == 0
    }
}

/// The routes with realms, most specific first (ties in the order given).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Fib {
    routes: Vec<RealmRoute>,
}

impl Fib {
    pub fn routes(&self) -> &[RealmRoute] {
        &self.routes
    }

    pub fn get(&self, prefix: u32, len: u8) -> Option<&RealmRoute> {
        self.routes
            .iter()
            .find(|r| (r.prefix, r.len) == (prefix, len))
    }

    /// Set the route of `r`'s prefix (`ip route replace`), keeping the table most specific first.
    pub fn replace(&mut self, r: RealmRoute) {
        self.remove(r.prefix, r.len);
        let at = self
            .routes
            .iter()
            .position(|o| o.len < r.len)
            .unwrap_or(self.routes.len());
        self.routes.insert(at, r);
    }

    /// Remove the route of this prefix; false if there was none.
    pub fn remove(&mut self, prefix: u32, len: u8) -> bool {
        let before = self.routes.len();
        self.routes.retain(|o| (o.prefix, o.len) != (prefix, len));
        self.routes.len() != before
    }

    /// The `nh_tclassid` of the most specific route covering `addr`; 0 when none does.
    pub fn realm_of(&self, addr: u32) -> u32 {
        self.routes
            .iter()
            .find(|r| r.covers(addr))
            .map_or(0, |r| r.tclassid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(prefix: u32, len: u8, tclassid: u32) -> RealmRoute {
        RealmRoute {
            prefix,
            len,
            tclassid,
            via: None,
            dev: None,
        }
    }

    #[test]
    fn the_most_specific_route_gives_the_realm() {
        let mut f = Fib::default();
        f.replace(r(0, 0, 9));
        f.replace(r(0x0a01_0000, 16, 5));
        f.replace(r(0x0a01_0200, 24, 7));
        assert_eq!(f.realm_of(0x0a01_0203), 7, "the /24");
        assert_eq!(f.realm_of(0x0a01_0303), 5, "the /16");
        assert_eq!(f.realm_of(0x0b00_0001), 9, "the default");
        f.replace(r(0x0a01_0000, 16, 6));
        assert_eq!(f.realm_of(0x0a01_0303), 6, "replaced");
        assert!(f.remove(0, 0) && !f.remove(0, 0));
        assert_eq!(f.realm_of(0x0b00_0001), 0, "no route, no realm");
    }
}
