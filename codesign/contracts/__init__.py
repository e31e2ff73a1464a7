"""codesign/contracts"""
