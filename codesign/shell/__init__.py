"""codesign/shell"""
