"""codesign/step/csb"""
