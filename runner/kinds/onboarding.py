"""Onboarding: a company, its merchant and its account, each made once, in order."""

from runner.engine.onboarding import OnboardingFlow
from runner.job.collection import OnboardingItem
from runner.kinds import Kind, same
from runner.validation.onboarding import check_onboarding, want_onboarding

KIND = Kind("onboarding", OnboardingItem, OnboardingFlow, lambda p: p.onboarding,
            "jobs/onboarding.yaml", check=check_onboarding, wants=want_onboarding,
            same_payment=same.onboarding, same_payment_is="company and merchant name")
