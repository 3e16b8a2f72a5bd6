"""The micro world's domains, in a fixed order (task i of a split belongs to DOMAINS[i % 6])."""

from envs.micro.domains import bank, calendar, files, library, shop, travel
from envs.micro.domains.base import Domain, TaskSpec, Vocab

DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (shop.DOMAIN, bank.DOMAIN, library.DOMAIN, calendar.DOMAIN, files.DOMAIN, travel.DOMAIN)
}

__all__ = ["DOMAINS", "Domain", "TaskSpec", "Vocab"]
